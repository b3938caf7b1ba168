import Crypto
import Foundation
import StepAttestation
import Testing

/// Base64url without padding, for building tokens in tests.
enum TestBase64URL {
    static func encode(_ bytes: some DataProtocol) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: some StringProtocol) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64.append("=") }
        return Data(base64Encoded: base64)
    }

    static func json(_ object: [String: Any]) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// Replaces segment `index` of a compact serialization after passing its bytes through `change`.
    static func mutating(_ token: String, segment index: Int, _ change: (inout Data) -> Void) -> String {
        var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var bytes = decode(parts[index]) ?? Data()
        change(&bytes)
        parts[index] = encode(bytes)
        return parts.joined(separator: ".")
    }
}

/// Mints classic Play Integrity tokens the way Google does: ES256 JWS inside an A256KW/A256GCM JWE.
struct PlayIntegrityTokenFactory {
    var signingKey = P256.Signing.PrivateKey()
    var aesKey = SymmetricKey(size: .bits256)

    var decryptionKeyBase64: String { aesKey.withUnsafeBytes { Data($0) }.base64EncodedString() }
    var verificationKeyBase64: String { signingKey.publicKey.derRepresentation.base64EncodedString() }

    func jws(payload: Data, header: [String: Any] = ["alg": "ES256"]) throws -> String {
        let signingInput = try TestBase64URL.encode(TestBase64URL.json(header)) + "." + TestBase64URL.encode(payload)
        let signature = try signingKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + TestBase64URL.encode(signature.rawRepresentation)
    }

    func jwe(plaintext: String, header: [String: Any] = ["alg": "A256KW", "enc": "A256GCM"]) throws -> String {
        let protectedHeader = try TestBase64URL.encode(TestBase64URL.json(header))
        let contentKey = SymmetricKey(size: .bits256)
        let wrappedKey = try AES.KeyWrap.wrap(contentKey, using: aesKey)
        let box = try AES.GCM.seal(Data(plaintext.utf8), using: contentKey, authenticating: Data(protectedHeader.utf8))
        return [
            protectedHeader, TestBase64URL.encode(wrappedKey), TestBase64URL.encode(Data(box.nonce)),
            TestBase64URL.encode(box.ciphertext), TestBase64URL.encode(box.tag),
        ].joined(separator: ".")
    }

    func token(_ verdict: VerdictJSON) throws -> String {
        try jwe(plaintext: jws(payload: TestBase64URL.json(verdict.object)))
    }

    func configuration(
        requiredDeviceLevel: PlayIntegrityDeviceLevel = .device,
        requireLicensed: Bool = false
    ) -> PlayIntegrityConfiguration {
        PlayIntegrityConfiguration(
            packageName: VerdictJSON.packageName,
            decryptionKeyBase64: decryptionKeyBase64,
            verificationKeyBase64: verificationKeyBase64,
            requiredDeviceLevel: requiredDeviceLevel,
            requireLicensed: requireLicensed,
            maximumAge: 300,
            maximumFutureSkew: 60
        )
    }

    func verifier(requiredDeviceLevel: PlayIntegrityDeviceLevel = .device, requireLicensed: Bool = false) throws
        -> PlayIntegrityVerifier
    {
        try PlayIntegrityVerifier(
            configuration: configuration(requiredDeviceLevel: requiredDeviceLevel, requireLicensed: requireLicensed)
        )
    }
}

/// Google's verdict layout (developer.android.com/google/play/integrity/verdicts); nil leaves a field out.
struct VerdictJSON {
    static let packageName = "org.stepledger.android"
    static let nonce = "c3RlcGxlZGdlci1ub25jZS0wMDE"
    static let now = Date(timeIntervalSince1970: 1_780_000_000)

    var requestPackageName: String? = packageName
    var nonce: String? = nonce
    var timestampMillis: Int64? = Int64(now.timeIntervalSince1970 * 1000) - 10_000
    var includeRequestDetails = true
    var appRecognitionVerdict: String? = "PLAY_RECOGNIZED"
    var appPackageName: String? = packageName
    var deviceRecognitionVerdict: [String]? = ["MEETS_DEVICE_INTEGRITY"]
    var appLicensingVerdict: String? = "LICENSED"

    var object: [String: Any] {
        var object: [String: Any] = [:]
        if includeRequestDetails {
            var details: [String: Any] = [:]
            details["requestPackageName"] = requestPackageName
            details["nonce"] = nonce
            details["timestampMillis"] = timestampMillis.map { String($0) }
            object["requestDetails"] = details
        }
        var app: [String: Any] = ["certificateSha256Digest": ["6a6a1474b5cbbb2b1aa57e0bc3"], "versionCode": "42"]
        app["appRecognitionVerdict"] = appRecognitionVerdict
        app["packageName"] = appPackageName
        object["appIntegrity"] = app
        if let deviceRecognitionVerdict {
            object["deviceIntegrity"] = ["deviceRecognitionVerdict": deviceRecognitionVerdict]
        }
        if let appLicensingVerdict { object["accountDetails"] = ["appLicensingVerdict": appLicensingVerdict] }
        return object
    }
}

@Suite("Play Integrity verifier")
struct PlayIntegrityVerifierTests {
    let factory = PlayIntegrityTokenFactory()
    let now = VerdictJSON.now

    func verify(
        _ verdict: VerdictJSON,
        requiredDeviceLevel: PlayIntegrityDeviceLevel = .device,
        requireLicensed: Bool = false
    ) throws -> PlayIntegrityVerdict {
        try factory.verifier(requiredDeviceLevel: requiredDeviceLevel, requireLicensed: requireLicensed)
            .verify(token: factory.token(verdict), expectedNonce: VerdictJSON.nonce, now: now)
    }

    func expectRejection(
        _ expected: PlayIntegrityError,
        _ verdict: VerdictJSON,
        requiredDeviceLevel: PlayIntegrityDeviceLevel = .device,
        requireLicensed: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let verifier = try factory.verifier(requiredDeviceLevel: requiredDeviceLevel, requireLicensed: requireLicensed)
        let token = try factory.token(verdict)
        #expect(throws: expected, sourceLocation: sourceLocation) {
            try verifier.verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("A genuine token verifies and reports what it established")
    func positive() throws {
        let verdict = try verify(VerdictJSON())
        #expect(verdict.packageName == VerdictJSON.packageName)
        #expect(verdict.nonce == VerdictJSON.nonce)
        #expect(verdict.timestamp == now.addingTimeInterval(-10))
        #expect(verdict.deviceRecognitionVerdict == ["MEETS_DEVICE_INTEGRITY"])
        #expect(verdict.appLicensingVerdict == "LICENSED")
    }

    @Test("A token encrypted under another AES key does not decrypt")
    func wrongAESKey() throws {
        let other = PlayIntegrityTokenFactory(signingKey: factory.signingKey)
        let token = try other.token(VerdictJSON())
        #expect(throws: PlayIntegrityError.decryptionFailed) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test(
        "Tampering with any JWE part fails authentication",
        arguments: [("protected header", 0), ("encrypted key", 1), ("IV", 2), ("ciphertext", 3), ("tag", 4)]
    )
    func tamperedJWE(part: String, index: Int) throws {
        let token = try factory.token(VerdictJSON())
        let tampered: String
        if index == 0 {
            // Still A256KW/A256GCM, but no longer the header the AAD covered.
            let header = try TestBase64URL.encode(
                TestBase64URL.json(["alg": "A256KW", "enc": "A256GCM", "kid": "x"])
            )
            tampered = header + token.drop(while: { $0 != "." })
        } else {
            tampered = TestBase64URL.mutating(token, segment: index) { $0[$0.startIndex] ^= 0x01 }
        }
        #expect(throws: PlayIntegrityError.decryptionFailed, "\(part)") {
            try factory.verifier().verify(token: tampered, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("A JWS whose signature was altered is rejected after decryption")
    func tamperedSignature() throws {
        let jws = try factory.jws(payload: TestBase64URL.json(VerdictJSON().object))
        let tampered = TestBase64URL.mutating(jws, segment: 2) { $0[$0.startIndex + 5] ^= 0x80 }
        let token = try factory.jwe(plaintext: tampered)
        #expect(throws: PlayIntegrityError.invalidSignature) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("A JWS whose payload was swapped is rejected")
    func swappedPayload() throws {
        let jws = try factory.jws(payload: TestBase64URL.json(VerdictJSON().object))
        var forged = VerdictJSON()
        forged.deviceRecognitionVerdict = ["MEETS_STRONG_INTEGRITY"]
        let forgedBytes = try TestBase64URL.json(forged.object)
        let swapped = TestBase64URL.mutating(jws, segment: 1) { $0 = forgedBytes }
        let token = try factory.jwe(plaintext: swapped)
        #expect(throws: PlayIntegrityError.invalidSignature) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("A JWS signed by another key is rejected")
    func wrongVerificationKey() throws {
        let other = PlayIntegrityTokenFactory(signingKey: P256.Signing.PrivateKey(), aesKey: factory.aesKey)
        let token = try other.token(VerdictJSON())
        #expect(throws: PlayIntegrityError.invalidSignature) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test(
        "Only A256KW + A256GCM outside and ES256 inside are accepted",
        arguments: [
            (["alg": "RSA-OAEP-256", "enc": "A256GCM"], ["alg": "ES256"]),
            (["alg": "A128KW", "enc": "A256GCM"], ["alg": "ES256"]),
            (["alg": "A256KW", "enc": "A128CBC-HS256"], ["alg": "ES256"]),
            (["alg": "A256KW", "enc": "A256GCM", "zip": "DEF"], ["alg": "ES256"]),
            (["alg": "dir", "enc": "A256GCM"], ["alg": "ES256"]),
            (["alg": "A256KW", "enc": "A256GCM"], ["alg": "ES384"]),
            (["alg": "A256KW", "enc": "A256GCM"], ["alg": "none"]),
            (["alg": "A256KW", "enc": "A256GCM"], ["alg": "HS256"]),
            (["alg": "A256KW", "enc": "a256gcm"], ["alg": "ES256"]),
        ] as [([String: String], [String: String])]
    )
    func algorithms(jweHeader: [String: String], jwsHeader: [String: String]) throws {
        let jws = try factory.jws(payload: TestBase64URL.json(VerdictJSON().object), header: jwsHeader)
        let token = try factory.jwe(plaintext: jws, header: jweHeader)
        #expect(throws: PlayIntegrityError.unsupportedAlgorithm) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("Another app's package name is rejected, in requestDetails or appIntegrity")
    func wrongPackage() throws {
        var verdict = VerdictJSON()
        verdict.requestPackageName = "com.example.cheat"
        try expectRejection(.packageNameMismatch, verdict)
        verdict = VerdictJSON()
        verdict.appPackageName = "com.example.cheat"
        try expectRejection(.packageNameMismatch, verdict)
        verdict = VerdictJSON()
        verdict.requestPackageName = nil
        try expectRejection(.packageNameMismatch, verdict)
    }

    @Test("A nonce other than the one issued is rejected")
    func wrongNonce() throws {
        var verdict = VerdictJSON()
        verdict.nonce = "c3RlcGxlZGdlci1ub25jZS0wMDI"
        try expectRejection(.nonceMismatch, verdict)
        verdict.nonce = nil
        try expectRejection(.nonceMismatch, verdict)
        let verifier = try factory.verifier()
        let token = try factory.token(VerdictJSON())
        #expect(throws: PlayIntegrityError.nonceMismatch) {
            try verifier.verify(token: token, expectedNonce: "", now: now)
        }
    }

    @Test(
        "The timestamp must lie within the window around now",
        arguments: [
            (-300_000, true), (-300_001, false), (-86_400_000, false), (60_000, true), (60_001, false),
            (3_600_000, false),
        ] as [(Int64, Bool)]
    )
    func timestampWindow(offsetMillis: Int64, accepted: Bool) throws {
        var verdict = VerdictJSON()
        verdict.timestampMillis = Int64(now.timeIntervalSince1970 * 1000) + offsetMillis
        if accepted {
            _ = try verify(verdict)
        } else {
            try expectRejection(.timestampOutOfWindow, verdict)
        }
    }

    @Test("An absent timestamp is rejected")
    func absentTimestamp() throws {
        var verdict = VerdictJSON()
        verdict.timestampMillis = nil
        try expectRejection(.timestampOutOfWindow, verdict)
    }

    @Test("An app Play does not recognize is rejected", arguments: ["UNRECOGNIZED_VERSION", "UNEVALUATED", nil])
    func unrecognizedApp(appVerdict: String?) throws {
        var verdict = VerdictJSON()
        verdict.appRecognitionVerdict = appVerdict
        try expectRejection(.appNotRecognized, verdict)
    }

    @Test(
        "Device integrity: a stronger verdict satisfies a weaker requirement, never the reverse",
        arguments: [
            ([], PlayIntegrityDeviceLevel.basic, false),
            (["MEETS_VIRTUAL_INTEGRITY"], .basic, false),
            (["MEETS_BASIC_INTEGRITY"], .basic, true),
            (["MEETS_BASIC_INTEGRITY"], .device, false),
            (["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY"], .device, true),
            (["MEETS_DEVICE_INTEGRITY"], .basic, true),
            (["MEETS_DEVICE_INTEGRITY"], .strong, false),
            (["MEETS_BASIC_INTEGRITY", "MEETS_DEVICE_INTEGRITY", "MEETS_STRONG_INTEGRITY"], .strong, true),
            (["MEETS_STRONG_INTEGRITY"], .device, true),
            (["meets_device_integrity"], .basic, false),
        ] as [([String], PlayIntegrityDeviceLevel, Bool)]
    )
    func deviceIntegrity(labels: [String], required: PlayIntegrityDeviceLevel, accepted: Bool) throws {
        var verdict = VerdictJSON()
        verdict.deviceRecognitionVerdict = labels
        if accepted {
            _ = try verify(verdict, requiredDeviceLevel: required)
        } else {
            try expectRejection(.deviceIntegrityInsufficient, verdict, requiredDeviceLevel: required)
        }
    }

    @Test("An absent device verdict is rejected")
    func absentDeviceVerdict() throws {
        var verdict = VerdictJSON()
        verdict.deviceRecognitionVerdict = nil
        try expectRejection(.deviceIntegrityInsufficient, verdict, requiredDeviceLevel: .basic)
    }

    @Test("Licensing is checked only when required")
    func licensing() throws {
        var verdict = VerdictJSON()
        _ = try verify(verdict, requireLicensed: true)
        verdict.appLicensingVerdict = nil
        _ = try verify(verdict)
        try expectRejection(.licensingRequired, verdict, requireLicensed: true)
        verdict.appLicensingVerdict = "UNLICENSED"
        _ = try verify(verdict)
        try expectRejection(.licensingRequired, verdict, requireLicensed: true)
    }

    @Test("A payload without requestDetails, or with mistyped fields, is not a verdict")
    func malformedPayload() throws {
        var verdict = VerdictJSON()
        verdict.includeRequestDetails = false
        try expectRejection(.malformedPayload, verdict)

        var object = VerdictJSON().object
        object["deviceIntegrity"] = ["deviceRecognitionVerdict": "MEETS_DEVICE_INTEGRITY"]
        let token = try factory.jwe(plaintext: factory.jws(payload: TestBase64URL.json(object)))
        #expect(throws: PlayIntegrityError.malformedPayload) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("Every failing policy is named in the detail; the first is the reason")
    func everyReason() throws {
        var verdict = VerdictJSON()
        verdict.nonce = "other"
        verdict.appRecognitionVerdict = "UNEVALUATED"
        let token = try factory.token(verdict)
        let verifier = try factory.verifier()
        do throws(PlayIntegrityError) {
            _ = try verifier.verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
            Issue.record("accepted")
        } catch {
            #expect(error == .nonceMismatch)
            #expect(error.reason == "nonceMismatch")
            #expect(error.detail.contains("appNotRecognized"))
        }
    }

    @Test("A JWS with a critical header it does not understand is refused")
    func criticalHeader() throws {
        let jws = try factory.jws(
            payload: TestBase64URL.json(VerdictJSON().object),
            header: ["alg": "ES256", "crit": ["exp"], "exp": 1]
        )
        let token = try factory.jwe(plaintext: jws)
        #expect(throws: PlayIntegrityError.unsupportedAlgorithm) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("Configuration refuses bad keys and keeps them out of its description")
    func configuration() throws {
        var configuration = factory.configuration()
        #expect(!configuration.description.contains(factory.decryptionKeyBase64))
        #expect(!configuration.description.contains(factory.verificationKeyBase64))
        configuration.decryptionKeyBase64 = Data(repeating: 1, count: 16).base64EncodedString()
        #expect(throws: PlayIntegrityError.invalidConfiguration) {
            try PlayIntegrityVerifier(configuration: configuration)
        }
        configuration = factory.configuration()
        configuration.verificationKeyBase64 = "not base64!"
        #expect(throws: PlayIntegrityError.invalidConfiguration) {
            try PlayIntegrityVerifier(configuration: configuration)
        }
        configuration = factory.configuration()
        configuration.verificationKeyBase64 = P384.Signing.PrivateKey().publicKey.derRepresentation
            .base64EncodedString()
        #expect(throws: PlayIntegrityError.invalidConfiguration) {
            try PlayIntegrityVerifier(configuration: configuration)
        }
    }
}
