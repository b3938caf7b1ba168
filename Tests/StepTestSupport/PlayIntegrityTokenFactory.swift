import Crypto
import Foundation
import StepAttestation

/// JSON and segment helpers for building and tampering with compact tokens in tests.
package enum TestBase64URL {
    package static func json(_ object: [String: Any]) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// Replaces segment `index` of a compact serialization after passing its bytes through `change`.
    package static func mutating(_ token: String, segment index: Int, _ change: (inout Data) -> Void) -> String {
        var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var bytes = Base64URL.decode(parts[index]) ?? Data()
        change(&bytes)
        parts[index] = Base64URL.encode(bytes)
        return parts.joined(separator: ".")
    }
}

/// Mints classic Play Integrity tokens the way Google does: ES256 JWS inside an A256KW/A256GCM JWE.
package struct PlayIntegrityTokenFactory {
    package init(
        signingKey: P256.Signing.PrivateKey = P256.Signing.PrivateKey(),
        aesKey: SymmetricKey = SymmetricKey(size: .bits256)
    ) {
        self.signingKey = signingKey
        self.aesKey = aesKey
    }

    package var signingKey: P256.Signing.PrivateKey
    package var aesKey: SymmetricKey

    package var decryptionKeyBase64: String { aesKey.withUnsafeBytes { Data($0) }.base64EncodedString() }
    package var verificationKeyBase64: String { signingKey.publicKey.derRepresentation.base64EncodedString() }

    package func jws(payload: Data, header: [String: Any] = ["alg": "ES256"]) throws -> String {
        let signingInput = try Base64URL.encode(TestBase64URL.json(header)) + "." + Base64URL.encode(payload)
        let signature = try signingKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    package func jwe(plaintext: String, header: [String: Any] = ["alg": "A256KW", "enc": "A256GCM"]) throws -> String {
        let protectedHeader = try Base64URL.encode(TestBase64URL.json(header))
        let contentKey = SymmetricKey(size: .bits256)
        let wrappedKey = try AES.KeyWrap.wrap(contentKey, using: aesKey)
        let box = try AES.GCM.seal(Data(plaintext.utf8), using: contentKey, authenticating: Data(protectedHeader.utf8))
        return [
            protectedHeader, Base64URL.encode(wrappedKey), Base64URL.encode(Data(box.nonce)),
            Base64URL.encode(box.ciphertext), Base64URL.encode(box.tag),
        ].joined(separator: ".")
    }

    package func token(_ verdict: VerdictJSON) throws -> String {
        try jwe(plaintext: jws(payload: TestBase64URL.json(verdict.object)))
    }

    package func configuration(
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

    package func verifier(requiredDeviceLevel: PlayIntegrityDeviceLevel = .device, requireLicensed: Bool = false) throws
        -> PlayIntegrityVerifier
    {
        try PlayIntegrityVerifier(
            configuration: configuration(requiredDeviceLevel: requiredDeviceLevel, requireLicensed: requireLicensed)
        )
    }
}

/// Google's verdict layout (developer.android.com/google/play/integrity/verdicts); nil leaves a field out.
package struct VerdictJSON {
    package init() {}

    package static let packageName = "org.stepledger.android"
    package static let nonce = "c3RlcGxlZGdlci1ub25jZS0wMDE"
    package static let now = Date(timeIntervalSince1970: 1_780_000_000)

    package var requestPackageName: String? = packageName
    package var nonce: String? = nonce
    package var timestampMillis: Int64? = Int64(now.timeIntervalSince1970 * 1000) - 10_000
    package var includeRequestDetails = true
    package var appRecognitionVerdict: String? = "PLAY_RECOGNIZED"
    package var appPackageName: String? = packageName
    package var deviceRecognitionVerdict: [String]? = ["MEETS_DEVICE_INTEGRITY"]
    package var appLicensingVerdict: String? = "LICENSED"

    package var object: [String: Any] {
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
