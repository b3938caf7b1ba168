import Crypto
import Foundation
import StepAttestation
import StepCore
import StepSettings
import StepStore

/// The platform a submission's attestation comes from (seed 002's `platform`).
enum HealthPlatform: String, Sendable {
    case ios
    case android
}

/// What a verified attestation lets the submission write, in the same transaction as the record.
enum HealthAttestation: Sendable, Equatable {
    /// A first use of a key: register it (counter 0).
    case registerKey(AppAttestKeyRecord)
    /// A later use: the key's counter moves up to `to`, unless another request moved it there or past it first.
    case advanceCounter(keyId: String, to: Int)
    /// Play Integrity holds nothing per device.
    case playIntegrity

    /// The audit row's token id: the App Attest key id (Play Integrity tokens carry none worth keeping).
    var keyId: String? {
        switch self {
        case .registerKey(let key): key.keyId
        case .advanceCounter(let keyId, _): keyId
        case .playIntegrity: nil
        }
    }
}

/// Why an attestation was refused: a code for the audit row and anti-cheat sink, and detail for the sink only.
/// The client hears only "Attestation verification failed".
struct HealthAttestationFailure: Error, Sendable, Equatable {
    var code: String
    var detail: String

    static func appAttest(_ error: AppAttestError) -> Self {
        Self(code: "APP_ATTEST_" + error.reasonCode, detail: error.description)
    }

    static func playIntegrity(_ error: PlayIntegrityError) -> Self {
        Self(code: "PLAY_INTEGRITY_" + error.reasonCode, detail: error.description)
    }
}

/// Verifies `POST /health`'s attestation token against the configured trust inputs, with
/// `clientDataHash = SHA256(nonce as UTF-8 text)` for App Attest and the nonce itself inside Play Integrity's
/// verdict. Reads the walker's registered keys but writes nothing: what to write comes back as a
/// `HealthAttestation`.
struct HealthAttestor: Sendable {
    /// Keys tried for an assertion without `keyId` (the walker's most recently registered).
    static let maxKeysTried = 10

    /// One attestation verifier per accepted App ID (`teamId.bundleId`), each trusting the same roots.
    let attestationVerifiers: [AppAttestAttestationVerifier]
    let playIntegrity: PlayIntegrityVerifier?
    /// The development CA's root while the server trusts it (`dev.appAttestAuthority`): a key registered under it is
    /// marked so, and a key so marked counts only while this is set.
    let developmentRoot: AppAttestDevelopmentRoot?

    /// From the `appAttest` and `playIntegrity` sections; `developmentRootPEM` is `stepd device`'s CA, given only
    /// while `dev.appAttestAuthority` is on (never in production).
    init(
        appAttest: AppAttestSettings, playIntegrity playIntegritySettings: PlayIntegritySettings, mode: ServiceMode,
        developmentRootPEM: String?
    ) throws {
        var roots = [AppleAppAttestationRoot.pem]
        if let file = appAttest.rootCertificateFile {
            roots = [try String(contentsOfFile: file, encoding: .utf8)]
        }
        if let developmentRootPEM { roots.append(developmentRootPEM) }
        do {
            developmentRoot = try developmentRootPEM.map(AppAttestDevelopmentRoot.init(pem:))
        } catch {
            throw ConfigurationError(
                key: "dev.appAttestAuthority", problem: "the development CA is not usable: \(error)")
        }
        do {
            attestationVerifiers = try appAttest.apps(mode: mode).map {
                try AppAttestAttestationVerifier(configuration: $0, rootCertificatesPEM: roots)
            }
        } catch {
            throw ConfigurationError(key: "appAttest.rootCertificateFile", problem: "is not usable: \(error)")
        }
        do {
            playIntegrity = try playIntegritySettings.configuration.map(PlayIntegrityVerifier.init)
        } catch {
            throw ConfigurationError(key: "playIntegrity.decryptionKey", problem: "is not usable: \(error)")
        }
    }

    /// Verifies `token`; `keys` reads the walker's registered keys (`keyId` or their latest).
    func verify(
        platform: HealthPlatform, token: String, keyId: String?, nonce: String, walkerId: String, now: Date,
        keys: (String?) async throws -> [AppAttestKeyRecord]
    ) async throws -> Result<HealthAttestation, HealthAttestationFailure> {
        switch platform {
        case .android:
            guard let playIntegrity else {
                return .failure(.init(code: "PLAY_INTEGRITY_NOT_CONFIGURED", detail: "playIntegrity.* is not set"))
            }
            do {
                _ = try playIntegrity.verify(token: token, expectedNonce: nonce, now: now)
                return .success(.playIntegrity)
            } catch {
                return .failure(.playIntegrity(error))
            }
        case .ios:
            guard !attestationVerifiers.isEmpty else {
                return .failure(.init(code: "APP_ATTEST_NOT_CONFIGURED", detail: "appAttest.* is not set"))
            }
            guard let bytes = Self.base64(token) else {
                return .failure(
                    .appAttest(AppAttestError(.malformedAttestationObject, detail: "attestationToken is not base64")))
            }
            let clientDataHash = Array(SHA256.hash(data: Array(nonce.utf8)))
            // An attestation object names its format; an assertion is {signature, authenticatorData}. Bytes the
            // strict decoder refuses are judged by their head: a map of three entries is an attestation object's.
            let decoded = try? CBORDecoder().decode(bytes)
            if decoded?["fmt"] != nil || (decoded == nil && bytes.first == Self.mapOfThree) {
                return await register(bytes, keyId: keyId, clientDataHash: clientDataHash, walkerId: walkerId, now: now)
            }
            return try await assert(bytes, keyId: keyId, clientDataHash: clientDataHash, keys: keys)
        }
    }

    /// A first use of a key: the verifier whose App ID the authenticator data names (the first when none
    /// does, so the refusal says "relying party"), with the key id given or the one the attestation carries.
    private func register(
        _ bytes: [UInt8], keyId: String?, clientDataHash: [UInt8], walkerId: String, now: Date
    ) async -> Result<HealthAttestation, HealthAttestationFailure> {
        let object: AppAttestAttestationObject
        do {
            object = try AppAttestAttestationObject(bytes: bytes)
        } catch {
            return .failure(.appAttest(error))
        }
        let rpIdHash = object.authenticatorData.relyingPartyIdentifierHash
        let verifier =
            attestationVerifiers.first { $0.configuration.relyingPartyIdentifierHash == rpIdHash }
            ?? attestationVerifiers[0]
        var keyIdentifier = object.authenticatorData.attestedCredentialData?.credentialIdentifier ?? []
        if let keyId {
            guard let given = Self.base64(keyId) else {
                return .failure(.appAttest(AppAttestError(.keyIdentifierMismatch, detail: "keyId is not base64")))
            }
            keyIdentifier = given
        }
        do {
            let result = try await verifier.verify(
                attestationObject: bytes, clientDataHash: clientDataHash, keyIdentifier: keyIdentifier, now: now)
            return .success(
                .registerKey(
                    AppAttestKeyRecord(
                        walkerId: walkerId, keyId: Data(result.keyIdentifier).base64EncodedString(),
                        publicKey: Data(result.publicKey.x963Representation).base64EncodedString(),
                        appId: verifier.configuration.appIdentifier, environment: result.environment.rawValue,
                        signCount: 0, receipt: Data(result.receipt).base64EncodedString(),
                        development: developmentRoot?.issued(object) ?? false)))
        } catch {
            return .failure(.appAttest(error))
        }
    }

    /// A later use: the assertion must verify with one of the walker's keys and advance its counter.
    private func assert(
        _ bytes: [UInt8], keyId: String?, clientDataHash: [UInt8],
        keys: (String?) async throws -> [AppAttestKeyRecord]
    ) async throws -> Result<HealthAttestation, HealthAttestationFailure> {
        var normalizedKeyId: String?
        if let keyId {
            guard let given = Self.base64(keyId) else {
                return .failure(.appAttest(AppAttestError(.malformedAssertion, detail: "keyId is not base64")))
            }
            normalizedKeyId = Data(given).base64EncodedString()
        }
        do {
            _ = try AppAttestAssertion(bytes: bytes)
        } catch {
            return .failure(.appAttest(error))
        }
        let candidates = try await keys(normalizedKeyId)
        guard !candidates.isEmpty else {
            return .failure(.init(code: "APP_ATTEST_UNKNOWN_KEY", detail: "no registered key for this walker"))
        }
        // What the refusal names: a failure other than a bad signature (the key that made the assertion, with a
        // wrong counter or App ID) over the signature failures of the walker's other keys; else the first.
        var reported: AppAttestError?
        for key in candidates {
            guard let app = attestationVerifiers.first(where: { $0.configuration.appIdentifier == key.appId }),
                let environment = AppAttestEnvironment(rawValue: key.environment),
                app.configuration.allowedEnvironments.contains(environment),
                let publicKeyBytes = Data(base64Encoded: key.publicKey),
                let publicKey = try? P256.Signing.PublicKey(x963Representation: publicKeyBytes),
                let previous = UInt32(exactly: key.signCount),
                !key.development || developmentRoot != nil
            else {
                // A key registered for an App ID no longer configured, in an environment no longer allowed
                // (`appAttest.environment` narrowed to production since), or under the development CA while the
                // server no longer trusts it (`dev.appAttestAuthority` off, production), counts for nothing.
                continue
            }
            do {
                let result = try AppAttestAssertionVerifier(configuration: app.configuration).verify(
                    assertion: bytes, clientDataHash: clientDataHash, publicKey: publicKey, previousCounter: previous)
                return .success(.advanceCounter(keyId: key.keyId, to: Int(result.counter)))
            } catch {
                if reported == nil || error.code != .invalidSignature { reported = error }
            }
        }
        guard let reported else {
            return .failure(
                .init(
                    code: "APP_ATTEST_UNKNOWN_KEY",
                    detail: "no key of a configured App ID and allowed environment, attested under a trusted root"))
        }
        return .failure(.appAttest(reported))
    }

    /// CBOR's head of a map of three entries (major type 5, count 3): `fmt`, `attStmt`, `authData`.
    static let mapOfThree: UInt8 = 0xA3

    /// Standard or URL-safe base64, padded or not.
    static func base64(_ text: String) -> [UInt8]? {
        if let data = Data(base64Encoded: text) { return Array(data) }
        var trimmed = Substring(text)
        while trimmed.hasSuffix("=") { trimmed = trimmed.dropLast() }
        return Base64URL.decode(
            trimmed.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        )
        .map(Array.init)
    }
}
