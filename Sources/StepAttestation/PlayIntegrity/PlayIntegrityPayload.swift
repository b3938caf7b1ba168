import Foundation

/// The parts of Google's verdict JSON (the JWS payload of a classic request) that the policies read.
/// Absent fields stay nil so each policy can report its own reason; wrongly typed fields make the
/// whole payload malformed.
package struct PlayIntegrityPayload: Decodable, Sendable, Equatable {
    package struct RequestDetails: Decodable, Sendable, Equatable {
        package var requestPackageName: String?
        package var nonce: String?
        package var timestampMillis: Millis?
    }

    package struct AppIntegrity: Decodable, Sendable, Equatable {
        package var appRecognitionVerdict: String?
        package var packageName: String?
    }

    package struct DeviceIntegrity: Decodable, Sendable, Equatable {
        package var deviceRecognitionVerdict: [String]?
    }

    package struct AccountDetails: Decodable, Sendable, Equatable {
        package var appLicensingVerdict: String?
    }

    /// Google sends `timestampMillis` as a decimal string; a JSON integer is accepted too.
    package struct Millis: Decodable, Sendable, Equatable {
        package var value: Int64

        package init(_ value: Int64) { self.value = value }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let text = try? container.decode(String.self) {
                guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                    let value = Int64(text)
                else {
                    throw DecodingError.dataCorruptedError(in: container, debugDescription: "timestampMillis")
                }
                self.value = value
            } else {
                self.value = try container.decode(Int64.self)
            }
        }

        package var date: Date { Date(timeIntervalSince1970: Double(value) / 1000) }
    }

    /// Required: its absence means the JSON is not a Play Integrity verdict at all.
    package var requestDetails: RequestDetails
    package var appIntegrity: AppIntegrity?
    package var deviceIntegrity: DeviceIntegrity?
    package var accountDetails: AccountDetails?
}
