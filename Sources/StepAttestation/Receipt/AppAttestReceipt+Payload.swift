import Foundation
import SwiftASN1

extension AppAttestReceipt {
    private enum Field: Int {
        case appID = 2
        case attestedPublicKey = 3
        case clientHash = 4
        case token = 5
        case receiptType = 6
        case environment = 7
        case creationTime = 12
        case riskMetric = 17
        case notBefore = 19
        case expirationTime = 21
    }

    /// Parses the signed payload: `SET OF SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`.
    ///
    /// Unknown field types are ignored so that fields Apple adds later do not break inspection; a repeated field is
    /// rejected because it would make the receipt ambiguous.
    package init(payload: [UInt8]) throws(AppAttestReceiptError) {
        let values = try Self.fieldValues(in: payload)

        func required(_ field: Field) throws(AppAttestReceiptError) -> [UInt8] {
            guard let value = values[field.rawValue] else {
                throw AppAttestReceiptError(.missingField, detail: "field \(field.rawValue)")
            }
            return value
        }

        let typeText = try Self.text(try required(.receiptType), field: .receiptType)
        guard let type = ReceiptType(rawValue: typeText) else {
            throw AppAttestReceiptError(.malformedPayload, detail: "unknown receipt type \(typeText)")
        }
        let environment: Environment
        switch try values[Field.environment.rawValue].map({ bytes throws(AppAttestReceiptError) in
            try Self.text(bytes, field: .environment)
        }) {
        case nil, "production": environment = .production
        case "sandbox": environment = .sandbox
        case let other?: throw AppAttestReceiptError(.malformedPayload, detail: "unknown environment \(other)")
        }

        self.init(
            appID: try Self.text(try required(.appID), field: .appID),
            attestedPublicKey: try required(.attestedPublicKey),
            clientHash: try required(.clientHash),
            token: try Self.text(try required(.token), field: .token),
            type: type,
            environment: environment,
            creationTime: try Self.time(try required(.creationTime), field: .creationTime),
            riskMetric: try values[Field.riskMetric.rawValue].map { bytes throws(AppAttestReceiptError) in
                try Self.riskMetric(bytes)
            },
            notBefore: try values[Field.notBefore.rawValue].map { bytes throws(AppAttestReceiptError) in
                try Self.time(bytes, field: .notBefore)
            },
            expirationTime: try Self.time(try required(.expirationTime), field: .expirationTime)
        )
    }

    private static func fieldValues(in payload: [UInt8]) throws(AppAttestReceiptError) -> [Int: [UInt8]] {
        do {
            let root = try BER.parse(payload)
            guard root.identifier == .set, case .constructed(let entries) = root.content else {
                throw AppAttestReceiptError(.malformedPayload, detail: "payload is not a SET")
            }
            var values: [Int: [UInt8]] = [:]
            for entry in entries {
                let (type, value) = try BER.sequence(entry, identifier: .sequence) { nodes in
                    let type = try Int(berEncoded: &nodes)
                    _ = try Int(berEncoded: &nodes)
                    let value = try ASN1OctetString(berEncoded: &nodes)
                    return (type, Array(value.bytes))
                }
                guard values.updateValue(value, forKey: type) == nil else {
                    throw AppAttestReceiptError(.duplicateField, detail: "field \(type)")
                }
            }
            return values
        } catch let error as AppAttestReceiptError {
            throw error
        } catch {
            throw AppAttestReceiptError(.malformedPayload, detail: String(describing: error))
        }
    }

    private static func text(_ bytes: [UInt8], field: Field) throws(AppAttestReceiptError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw AppAttestReceiptError(.malformedPayload, detail: "field \(field.rawValue) is not UTF-8")
        }
        return text
    }

    private static func time(_ bytes: [UInt8], field: Field) throws(AppAttestReceiptError) -> Date {
        guard let date = AppAttestReceiptTimestamp.parse(bytes) else {
            throw AppAttestReceiptError(.malformedPayload, detail: "field \(field.rawValue) is not an RFC 3339 time")
        }
        return date
    }

    private static func riskMetric(_ bytes: [UInt8]) throws(AppAttestReceiptError) -> Int {
        guard (1...9).contains(bytes.count), bytes.allSatisfy({ (0x30...0x39).contains($0) }),
            let value = Int(String(decoding: bytes, as: UTF8.self))
        else {
            throw AppAttestReceiptError(.malformedPayload, detail: "field 17 is not a decimal count")
        }
        return value
    }
}
