import Crypto
import Foundation
import StepAttestation
import StepStore

/// The simulated iPhone behind `stepd device`: one App Attest key and its counter, kept in a JSON file between
/// commands so `attest` and each later `assert` act as the same device.
package struct DevelopmentDevice: Sendable {
    package let walkerId: String
    /// The App ID the key is bound to; later assertions keep using it even if the configuration changes, as a
    /// real key stays bound to the app that created it.
    package let app: AppAttestConfiguration
    package let environment: AppAttestEnvironment
    package let privateKey: P256.Signing.PrivateKey
    /// The counter of the last attestation (0) or assertion this device produced.
    package private(set) var counter: UInt32

    package var keyIdentifier: [UInt8] {
        AppAttestSimulatedDevice.keyIdentifier(for: privateKey.publicKey)
    }

    /// `<directory>/devices/<walker>.json` (the data directory's), with characters a file name cannot safely hold
    /// replaced; the walker id stored inside the file is what `load` checks.
    package static func defaultPath(walkerId: String, directory: String) -> String {
        let safe = walkerId.unicodeScalars.map { scalar -> String in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "-", "_", ".": String(scalar)
            default: "_"
            }
        }
        return ((directory as NSString).appendingPathComponent("devices") as NSString)
            .appendingPathComponent("\(safe.joined()).json")
    }

    /// What the app passes as clientDataHash for a server nonce: SHA256 of the nonce's UTF-8 text (SPEC.md
    /// "Health data").
    package static func clientDataHash(nonce: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(nonce.utf8)))
    }

    /// A fresh key attested by `authority` for the first configured app, in production when that app allows it.
    package static func attest(
        walkerId: String,
        nonce: String,
        apps: [AppAttestConfiguration],
        authority: AppAttestDevelopmentAuthority,
        now: Date
    ) throws -> (device: DevelopmentDevice, attestationObject: [UInt8]) {
        guard let app = apps.first else { throw DevelopmentDeviceError.noApp }
        let environment: AppAttestEnvironment =
            app.allowedEnvironments.contains(.production) ? .production : .development
        let device = DevelopmentDevice(
            walkerId: walkerId,
            app: AppAttestConfiguration(
                teamIdentifier: app.teamIdentifier, bundleIdentifier: app.bundleIdentifier,
                allowedEnvironments: [environment]),
            environment: environment, privateKey: P256.Signing.PrivateKey(), counter: 0)
        let object = try authority.attestationObject(
            deviceKey: device.privateKey, app: device.app, environment: environment,
            clientDataHash: clientDataHash(nonce: nonce), now: now)
        return (device, object)
    }

    /// `attest(walkerId:nonce:apps:authority:now:)` with the development CA kept in `store`, as `stepd device attest`
    /// and a test-phase server on the same database share it.
    package static func attest(
        walkerId: String,
        nonce: String,
        apps: [AppAttestConfiguration],
        store: Store,
        now: Date
    ) async throws -> (device: DevelopmentDevice, attestationObject: [UInt8]) {
        let authority = try await DevelopmentAppAttestCA.loadOrCreate(store: store, now: now)
        return try attest(walkerId: walkerId, nonce: nonce, apps: apps, authority: authority, now: now)
    }

    /// The next assertion: the counter moves first, so a saved device never repeats one.
    package mutating func nextAssertion(nonce: String) throws -> [UInt8] {
        guard counter < UInt32.max else { throw DevelopmentDeviceError.counterExhausted }
        counter += 1
        return try AppAttestSimulatedDevice.assertion(
            deviceKey: privateKey, app: app, counter: counter, clientDataHash: Self.clientDataHash(nonce: nonce))
    }
}

// MARK: The device file

extension DevelopmentDevice {
    /// The JSON document on disk. `keyId` is redundant with the key; it is there for people, and checked on load.
    private struct File: Codable {
        static let currentVersion = 1

        var version: Int
        var walker: String
        var teamId: String
        var bundleId: String
        var environment: String
        var keyId: String
        var privateKey: String
        var counter: UInt32
    }

    /// Reads the device saved at `path`, refusing a file made for another walker.
    package static func load(path: String, walkerId: String) throws -> DevelopmentDevice {
        guard FileManager.default.fileExists(atPath: path) else {
            throw DevelopmentDeviceError.fileMissing(path: path)
        }
        let file: File
        let key: P256.Signing.PrivateKey
        do {
            file = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
            key = try P256.Signing.PrivateKey(pemRepresentation: file.privateKey)
        } catch {
            throw DevelopmentDeviceError.unreadable(path: path, detail: String(describing: error))
        }
        guard file.version == File.currentVersion, let environment = AppAttestEnvironment(rawValue: file.environment)
        else {
            throw DevelopmentDeviceError.unreadable(path: path, detail: "unknown version or environment")
        }
        guard file.walker == walkerId else {
            throw DevelopmentDeviceError.otherWalker(path: path, walkerId: file.walker)
        }
        let device = DevelopmentDevice(
            walkerId: file.walker,
            app: AppAttestConfiguration(
                teamIdentifier: file.teamId, bundleIdentifier: file.bundleId, allowedEnvironments: [environment]),
            environment: environment, privateKey: key, counter: file.counter)
        guard Data(device.keyIdentifier).base64EncodedString() == file.keyId else {
            throw DevelopmentDeviceError.unreadable(path: path, detail: "keyId does not belong to privateKey")
        }
        return device
    }

    /// Writes the device to `path`, readable by its owner only because it holds the private key. The document
    /// goes to a new file that replaces the old one, so an interrupted save never leaves half a file.
    package func save(path: String) throws {
        let file = File(
            version: File.currentVersion, walker: walkerId, teamId: app.teamIdentifier,
            bundleId: app.bundleIdentifier, environment: environment.rawValue,
            keyId: Data(keyIdentifier).base64EncodedString(), privateKey: privateKey.pemRepresentation,
            counter: counter)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let bytes = Array(try encoder.encode(file)) + [0x0A]

        do {
            try AtomicFile.write(bytes, to: path)
        } catch {
            throw DevelopmentDeviceError.unwritable(path: path, detail: error.detail)
        }
    }
}
