import Crypto
import Foundation
import Testing

@testable import StepAttestation

/// The App Attest vectors (`Vectors/`, a copy of shared/vectors), decoded once per use.
enum AppAttestVectors {
    static let directory = TestVectors.directory

    static func files(prefix: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }.sorted()
    }

    static let attestationFiles = files(prefix: "appattest-attestation-")
    static let assertionFiles = files(prefix: "appattest-assertion-")

    static func rootPEM() throws -> String {
        try String(contentsOf: directory.appendingPathComponent("apple-app-attestation-root-ca.pem"), encoding: .utf8)
    }

    static func attestation(_ file: String) throws -> AttestationVector {
        try JSONDecoder().decode(AttestationVector.self, from: Data(contentsOf: directory.appendingPathComponent(file)))
    }

    static func assertion(_ file: String) throws -> AssertionVector {
        try JSONDecoder().decode(AssertionVector.self, from: Data(contentsOf: directory.appendingPathComponent(file)))
    }

    static func date(_ text: String) throws -> Date {
        if text.contains(".") {
            return try Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        }
        return try Date(text, strategy: .iso8601)
    }

    static func bytes(base64 text: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text) else { throw VectorError.badBase64(text) }
        return Array(data)
    }

    enum VectorError: Error {
        case badBase64(String)
    }
}

struct NegativeCase: Decodable, Sendable {
    let change: String
    let expect: String
}

struct AttestationVector: Decodable, Sendable {
    struct Expected: Decodable, Sendable {
        let aaguid: String
        let counter: Int
        let authDataExtensions: [String: String]?
        let publicKeyPem: String
    }

    let name: String
    let teamId: String
    let bundleId: String
    let environment: String
    let keyIdBase64: String
    let clientDataHashBase64: String
    let expectedNonceBase64: String
    let attestationBase64: String
    let validAt: String
    let expected: Expected
    let negativeCases: [NegativeCase]

    var configuredEnvironment: AppAttestEnvironment {
        environment == "production" ? .production : .development
    }

    func configuration(
        environments: Set<AppAttestEnvironment>? = nil,
        teamId: String? = nil,
        bundleId: String? = nil
    ) -> AppAttestConfiguration {
        AppAttestConfiguration(
            teamIdentifier: teamId ?? self.teamId,
            bundleIdentifier: bundleId ?? self.bundleId,
            allowedEnvironments: environments ?? [configuredEnvironment]
        )
    }

    func verifier(configuration: AppAttestConfiguration? = nil) throws -> AppAttestAttestationVerifier {
        try AppAttestAttestationVerifier(
            configuration: configuration ?? self.configuration(),
            rootCertificatePEM: AppAttestVectors.rootPEM()
        )
    }

    func attestationBytes() throws -> [UInt8] { try AppAttestVectors.bytes(base64: attestationBase64) }
    func keyIdentifier() throws -> [UInt8] { try AppAttestVectors.bytes(base64: keyIdBase64) }
    func clientDataHash() throws -> [UInt8] { try AppAttestVectors.bytes(base64: clientDataHashBase64) }
    func validDate() throws -> Date { try AppAttestVectors.date(validAt) }

    /// Verifies the vector with its recorded inputs, optionally replacing some of them.
    func verify(
        attestation: [UInt8]? = nil,
        clientDataHash: [UInt8]? = nil,
        keyIdentifier: [UInt8]? = nil,
        now: Date? = nil,
        configuration: AppAttestConfiguration? = nil,
        rootPEM: String? = nil
    ) async throws -> AppAttestAttestationResult {
        let verifier =
            if let rootPEM {
                try AppAttestAttestationVerifier(
                    configuration: configuration ?? self.configuration(),
                    rootCertificatePEM: rootPEM
                )
            } else {
                try self.verifier(configuration: configuration)
            }
        return try await verifier.verify(
            attestationObject: attestation ?? attestationBytes(),
            clientDataHash: clientDataHash ?? self.clientDataHash(),
            keyIdentifier: keyIdentifier ?? self.keyIdentifier(),
            now: now ?? validDate()
        )
    }
}

struct AssertionVector: Decodable, Sendable {
    struct Expected: Decodable, Sendable {
        let counter: UInt32
        let authenticatorDataLength: Int
    }

    let name: String
    let teamId: String
    let bundleId: String
    let keyIdBase64: String
    let publicKeyPem: String
    let clientDataBase64: String
    let clientDataHashBase64: String
    let assertionBase64: String
    let previousCounter: UInt32
    let expected: Expected
    let negativeCases: [NegativeCase]

    func configuration(bundleId: String? = nil) -> AppAttestConfiguration {
        AppAttestConfiguration(
            teamIdentifier: teamId,
            bundleIdentifier: bundleId ?? self.bundleId,
            allowedEnvironments: [.development, .production]
        )
    }

    func publicKey() throws -> P256.Signing.PublicKey { try P256.Signing.PublicKey(pemRepresentation: publicKeyPem) }
    func assertionBytes() throws -> [UInt8] { try AppAttestVectors.bytes(base64: assertionBase64) }
    func clientData() throws -> [UInt8] { try AppAttestVectors.bytes(base64: clientDataBase64) }
    func clientDataHash() throws -> [UInt8] { try AppAttestVectors.bytes(base64: clientDataHashBase64) }

    func verify(
        assertion: [UInt8]? = nil,
        clientDataHash: [UInt8]? = nil,
        publicKey: P256.Signing.PublicKey? = nil,
        previousCounter: UInt32? = nil,
        configuration: AppAttestConfiguration? = nil
    ) throws -> AppAttestAssertionResult {
        try AppAttestAssertionVerifier(configuration: configuration ?? self.configuration()).verify(
            assertion: assertion ?? assertionBytes(),
            clientDataHash: clientDataHash ?? self.clientDataHash(),
            publicKey: publicKey ?? self.publicKey(),
            previousCounter: previousCounter ?? self.previousCounter
        )
    }
}

/// Runs `body` and returns the code of the `AppAttestError` it threw, recording an issue when it succeeds or throws another type.
func appAttestFailure<T>(
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async -> AppAttestErrorCode? {
    do {
        _ = try await body()
        Issue.record("expected an AppAttestError, but verification succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as AppAttestError {
        return error.code
    } catch {
        Issue.record("expected an AppAttestError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// SplitMix64: a tiny seeded generator so fuzz runs are reproducible.
struct AppAttestSplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}

/// A minimal CBOR encoder for building mutated inputs in tests (the library only decodes).
enum CBORTestEncoder {
    static func encode(_ value: CBORValue) -> [UInt8] {
        switch value {
        case .unsigned(let number): head(0, number)
        case .negative(let number): head(1, number)
        case .bytes(let bytes): head(2, UInt64(bytes.count)) + bytes
        case .text(let text): head(3, UInt64(text.utf8.count)) + Array(text.utf8)
        case .array(let items): head(4, UInt64(items.count)) + items.flatMap(encode)
        case .map(let entries): head(5, UInt64(entries.count)) + entries.flatMap { encode($0.key) + encode($0.value) }
        case .bool(let flag): [flag ? 0xF5 : 0xF4]
        case .null: [0xF6]
        }
    }

    static func head(_ major: UInt8, _ argument: UInt64) -> [UInt8] {
        let type = major << 5
        switch argument {
        case 0..<24: return [type | UInt8(argument)]
        case 24...0xFF: return [type | 24, UInt8(argument)]
        case 0x100...0xFFFF: return [type | 25] + bigEndian(argument, width: 2)
        case 0x1_0000...0xFFFF_FFFF: return [type | 26] + bigEndian(argument, width: 4)
        default: return [type | 27] + bigEndian(argument, width: 8)
        }
    }

    private static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
        (0..<width).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    /// Replaces the value under a text key of a map.
    static func replacing(_ key: String, in map: CBORValue, with value: CBORValue) -> CBORValue {
        guard let entries = map.mapEntries else { return map }
        return .map(entries.map { $0.key == .text(key) ? CBORMapEntry(key: $0.key, value: value) : $0 })
    }
}

@Suite("App Attest vectors")
struct AppAttestVectorsTests {
    @Test("index.json lists every App Attest vector file, and each one decodes")
    func indexListsEveryVector() throws {
        struct Index: Decodable {
            struct Entry: Decodable {
                let file: String
                let kind: String
            }
            let vectors: [Entry]
        }
        let index = try JSONDecoder().decode(
            Index.self,
            from: Data(contentsOf: AppAttestVectors.directory.appendingPathComponent("index.json"))
        )
        let listed = Set(index.vectors.map(\.file))
        #expect(AppAttestVectors.attestationFiles.count == 14)
        #expect(AppAttestVectors.assertionFiles.count == 10)
        for file in AppAttestVectors.attestationFiles {
            #expect(listed.contains(file))
            #expect(try AppAttestVectors.attestation(file).negativeCases.count == 5)
        }
        for file in AppAttestVectors.assertionFiles {
            #expect(listed.contains(file))
            #expect(try AppAttestVectors.assertion(file).negativeCases.count == 3)
        }
    }

    @Test("The test encoder reproduces every attestation and assertion byte for byte")
    func roundTrip() throws {
        for file in AppAttestVectors.attestationFiles {
            let bytes = try AppAttestVectors.attestation(file).attestationBytes()
            #expect(CBORTestEncoder.encode(try CBORDecoder().decode(bytes)) == bytes, "\(file)")
        }
        for file in AppAttestVectors.assertionFiles {
            let bytes = try AppAttestVectors.assertion(file).assertionBytes()
            #expect(CBORTestEncoder.encode(try CBORDecoder().decode(bytes)) == bytes, "\(file)")
        }
    }
}
