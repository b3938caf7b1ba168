import Crypto
import Foundation
import StepAttestation
import StepTestSupport
import Testing

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
        _ expected: PlayIntegrityErrorCode,
        _ verdict: VerdictJSON,
        requiredDeviceLevel: PlayIntegrityDeviceLevel = .device,
        requireLicensed: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let verifier = try factory.verifier(requiredDeviceLevel: requiredDeviceLevel, requireLicensed: requireLicensed)
        let token = try factory.token(verdict)
        #expect(throws: PlayIntegrityError(expected), sourceLocation: sourceLocation) {
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
        #expect(throws: PlayIntegrityError(.decryptionFailed)) {
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
            let header = try Base64URL.encode(
                TestBase64URL.json(["alg": "A256KW", "enc": "A256GCM", "kid": "x"])
            )
            tampered = header + token.drop(while: { $0 != "." })
        } else {
            tampered = TestBase64URL.mutating(token, segment: index) { $0[$0.startIndex] ^= 0x01 }
        }
        #expect(throws: PlayIntegrityError(.decryptionFailed), "\(part)") {
            try factory.verifier().verify(token: tampered, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("A JWS whose signature was altered is rejected after decryption")
    func tamperedSignature() throws {
        let jws = try factory.jws(payload: TestBase64URL.json(VerdictJSON().object))
        let tampered = TestBase64URL.mutating(jws, segment: 2) { $0[$0.startIndex + 5] ^= 0x80 }
        let token = try factory.jwe(plaintext: tampered)
        #expect(throws: PlayIntegrityError(.invalidSignature)) {
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
        #expect(throws: PlayIntegrityError(.invalidSignature)) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("A JWS signed by another key is rejected")
    func wrongVerificationKey() throws {
        let other = PlayIntegrityTokenFactory(signingKey: P256.Signing.PrivateKey(), aesKey: factory.aesKey)
        let token = try other.token(VerdictJSON())
        #expect(throws: PlayIntegrityError(.invalidSignature)) {
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
        #expect(throws: PlayIntegrityError(.unsupportedAlgorithm)) {
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
        #expect(throws: PlayIntegrityError(.nonceMismatch)) {
            try verifier.verify(token: token, expectedNonce: "", now: now)
        }
    }

    @Test(
        "The issued nonce spelt with base64's standard alphabet or with padding is the same nonce; one byte off is not")
    func nonceSpellings() throws {
        let verifier = try factory.verifier()
        // Bytes whose base64 uses both characters the two alphabets differ in, and needs padding.
        let issued = Base64URL.encode(Data([0xfb, 0xff, 0xbf, 0xfe, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07]))
        #expect(issued.contains("-") && issued.contains("_"))
        let standard = Data(Base64URL.decode(issued) ?? Data()).base64EncodedString()
        #expect(standard.contains("+") && standard.contains("/") && standard.hasSuffix("="))
        for spelling in [issued, standard, issued + "=", String(standard.dropLast())] {
            var verdict = VerdictJSON()
            verdict.nonce = spelling
            let token = try factory.token(verdict)
            #expect(throws: Never.self, "\(spelling)") {
                try verifier.verify(token: token, expectedNonce: issued, now: now)
            }
        }
        var other = VerdictJSON()
        other.nonce = Base64URL.encode(Data([0xfb, 0xff, 0xbf, 0xfe, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x08]))
        let token = try factory.token(other)
        #expect(throws: PlayIntegrityError(.nonceMismatch)) {
            try verifier.verify(token: token, expectedNonce: issued, now: now)
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
        #expect(throws: PlayIntegrityError(.malformedPayload)) {
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
            #expect(error.code == .nonceMismatch)
            #expect(error.reasonCode == "NONCE_MISMATCH")
            #expect(error.detail?.contains("appNotRecognized") == true)
        }
    }

    @Test("A JWS with a critical header it does not understand is refused")
    func criticalHeader() throws {
        let jws = try factory.jws(
            payload: TestBase64URL.json(VerdictJSON().object),
            header: ["alg": "ES256", "crit": ["exp"], "exp": 1]
        )
        let token = try factory.jwe(plaintext: jws)
        #expect(throws: PlayIntegrityError(.unsupportedAlgorithm)) {
            try factory.verifier().verify(token: token, expectedNonce: VerdictJSON.nonce, now: now)
        }
    }

    @Test("Configuration refuses bad keys and keeps them out of its description")
    func configuration() throws {
        var configuration = factory.configuration()
        #expect(!configuration.description.contains(factory.decryptionKeyBase64))
        #expect(!configuration.description.contains(factory.verificationKeyBase64))
        configuration.decryptionKeyBase64 = Data(repeating: 1, count: 16).base64EncodedString()
        #expect(throws: PlayIntegrityError(.invalidConfiguration)) {
            try PlayIntegrityVerifier(configuration: configuration)
        }
        configuration = factory.configuration()
        configuration.verificationKeyBase64 = "not base64!"
        #expect(throws: PlayIntegrityError(.invalidConfiguration)) {
            try PlayIntegrityVerifier(configuration: configuration)
        }
        configuration = factory.configuration()
        configuration.verificationKeyBase64 = P384.Signing.PrivateKey().publicKey.derRepresentation
            .base64EncodedString()
        #expect(throws: PlayIntegrityError(.invalidConfiguration)) {
            try PlayIntegrityVerifier(configuration: configuration)
        }
    }
}
