import Crypto
import Foundation
import SwiftASN1
import X509

/// A stand-in for Apple's App Attestation CA, so the whole App Attest flow runs without a phone.
///
/// It issues what Apple's CA issues for a real key — a fresh intermediate under the root and a credential
/// certificate carrying the nonce extension — so the server's verifier runs every check unchanged, with only the
/// pinned root swapped. A server may trust this root in test-phase only: anyone holding the stored private key can
/// attest any key it likes.
package struct AppAttestDevelopmentAuthority: Sendable {
    /// Bytes put where Apple puts a CMS receipt. Registration stores the receipt unchecked; anything that later
    /// sends receipts to Apple can recognise this value and skip it.
    package static let placeholderReceipt = Array("StepLedger development App Attest receipt (not CMS)".utf8)

    private static let organization = "StepLedger development"
    private static let rootCommonName = "StepLedger Development App Attestation Root CA"
    private static let intermediateCommonName = "StepLedger Development App Attestation CA"
    private static let day: TimeInterval = 86_400
    /// A day of slack before `now` absorbs clock skew between the command that issues and the server that checks.
    private static let backdating = day
    private static let rootLifetime = 20 * 365 * day
    /// Issued certificates only need to outlive the registration request that carries them.
    private static let issuedLifetime = 30 * day

    package let rootCertificate: Certificate
    /// The root in PEM, as `AppAttestAttestationVerifier(configuration:rootCertificatePEM:)` takes it.
    package let rootCertificatePEM: String
    private let rootKey: P256.Signing.PrivateKey

    private init(rootKey: P256.Signing.PrivateKey, rootCertificate: Certificate, rootCertificatePEM: String) {
        self.rootKey = rootKey
        self.rootCertificate = rootCertificate
        self.rootCertificatePEM = rootCertificatePEM
    }

    /// A new root key and self-signed root certificate valid from a day before `now` for 20 years.
    package static func generate(now: Date) throws -> Self {
        let key = P256.Signing.PrivateKey()
        let publicKey = Certificate.PublicKey(key.publicKey)
        let name = try DistinguishedName {
            CommonName(rootCommonName)
            OrganizationName(organization)
        }
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            SubjectKeyIdentifier(hash: publicKey)
        }
        let certificate = try sign(
            publicKey, subject: name, extensions: extensions, issuer: name, issuerKey: key, now: now,
            lifetime: rootLifetime)
        return Self(
            rootKey: key, rootCertificate: certificate, rootCertificatePEM: try certificate.serializeAsPEM().pemString)
    }

    /// Reads the text `pemEncoded` produced: a PEM private key and the PEM root certificate, in any order.
    package init(pemEncoded: String) throws(AppAttestDevelopmentError) {
        let documents: [PEMDocument]
        do {
            documents = try PEMDocument.parseMultiple(pemString: pemEncoded)
        } catch {
            throw AppAttestDevelopmentError(.malformedAuthority, detail: String(describing: error))
        }
        guard let keyDocument = documents.first(where: { $0.discriminator.hasSuffix("PRIVATE KEY") }),
            let certificateDocument = documents.first(where: { $0.discriminator == "CERTIFICATE" })
        else {
            throw AppAttestDevelopmentError(.malformedAuthority, detail: "a PRIVATE KEY or CERTIFICATE is missing")
        }
        let key: P256.Signing.PrivateKey
        let certificate: Certificate
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: keyDocument.pemString)
            certificate = try Certificate(derEncoded: certificateDocument.derBytes)
        } catch {
            throw AppAttestDevelopmentError(.malformedAuthority, detail: String(describing: error))
        }
        guard P256.Signing.PublicKey(certificate.publicKey)?.x963Representation == key.publicKey.x963Representation
        else {
            throw AppAttestDevelopmentError(.keyDoesNotMatchCertificate)
        }
        self.init(rootKey: key, rootCertificate: certificate, rootCertificatePEM: certificateDocument.pemString)
    }

    /// The private key and the root certificate in PEM, for storage; it holds a secret.
    package var pemEncoded: String {
        rootKey.pemRepresentation + "\n" + rootCertificatePEM + "\n"
    }

    /// The CBOR attestation object a device holding `deviceKey` would send for `clientDataHash`: Apple's
    /// `{fmt: "apple-appattest", attStmt: {x5c: [credential certificate, intermediate], receipt}, authData}`, with
    /// the nonce extension set to SHA256(authData ‖ clientDataHash).
    package func attestationObject(
        deviceKey: P256.Signing.PrivateKey,
        app: AppAttestConfiguration,
        environment: AppAttestEnvironment,
        clientDataHash: [UInt8],
        now: Date
    ) throws -> [UInt8] {
        let authenticatorData = try AppAttestSimulatedDevice.attestationAuthenticatorData(
            publicKey: deviceKey.publicKey, app: app, environment: environment)
        let nonce = Array(SHA256.hash(data: authenticatorData + clientDataHash))
        let intermediateKey = P256.Signing.PrivateKey()
        let intermediate = try issueIntermediate(key: intermediateKey, now: now)
        let credential = try issueCredentialCertificate(
            publicKey: deviceKey.publicKey, nonce: nonce, issuer: intermediate, issuerKey: intermediateKey, now: now)

        let object: CBORValue = .map([
            CBORMapEntry(key: .text("fmt"), value: .text(AppAttestAttestationObject.format)),
            CBORMapEntry(
                key: .text("attStmt"),
                value: .map([
                    CBORMapEntry(
                        key: .text("x5c"),
                        value: .array([.bytes(try Self.der(credential)), .bytes(try Self.der(intermediate))])),
                    CBORMapEntry(key: .text("receipt"), value: .bytes(Self.placeholderReceipt)),
                ])),
            CBORMapEntry(key: .text("authData"), value: .bytes(authenticatorData)),
        ])
        return try CBOREncoder().encode(object)
    }

    /// Apple mints an intermediate per batch of keys; a fresh one per attestation is the simplest equivalent.
    private func issueIntermediate(key: P256.Signing.PrivateKey, now: Date) throws -> Certificate {
        let publicKey = Certificate.PublicKey(key.publicKey)
        let subject = try DistinguishedName {
            CommonName(Self.intermediateCommonName)
            OrganizationName(Self.organization)
        }
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            SubjectKeyIdentifier(hash: publicKey)
            AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: rootCertificate.publicKey).keyIdentifier)
        }
        return try Self.sign(
            publicKey, subject: subject, extensions: extensions, issuer: rootCertificate.subject, issuerKey: rootKey,
            now: now, lifetime: Self.issuedLifetime)
    }

    /// Like Apple's, the credential certificate is named by the hex key id and is not a CA.
    private func issueCredentialCertificate(
        publicKey: P256.Signing.PublicKey,
        nonce: [UInt8],
        issuer: Certificate,
        issuerKey: P256.Signing.PrivateKey,
        now: Date
    ) throws -> Certificate {
        let keyIdentifier = AppAttestSimulatedDevice.keyIdentifier(for: publicKey)
        let subject = try DistinguishedName {
            CommonName(keyIdentifier.map { String(format: "%02x", $0) }.joined())
            OrganizationName(Self.organization)
        }
        let nonceExtension = try AppAttestNonceExtension.certificateExtension(nonce: nonce)
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: issuer.publicKey).keyIdentifier)
            nonceExtension
        }
        return try Self.sign(
            Certificate.PublicKey(publicKey), subject: subject, extensions: extensions, issuer: issuer.subject,
            issuerKey: issuerKey, now: now, lifetime: Self.issuedLifetime)
    }

    /// A v3 certificate with a random serial, valid from `backdating` before `now` for `lifetime`.
    private static func sign(
        _ publicKey: Certificate.PublicKey,
        subject: DistinguishedName,
        extensions: Certificate.Extensions,
        issuer: DistinguishedName,
        issuerKey: P256.Signing.PrivateKey,
        now: Date,
        lifetime: TimeInterval
    ) throws -> Certificate {
        try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: publicKey,
            notValidBefore: now - backdating,
            notValidAfter: now + lifetime,
            issuer: issuer,
            subject: subject,
            extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuerKey)
        )
    }

    private static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}
