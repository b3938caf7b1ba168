import ArgumentParser
import Foundation
import StepAPI
import StepCore
import StepDatabase
import StepSettings
import StepStore

struct Device: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "A simulated iPhone for POST /health in test-phase: App Attest attestations and assertions from the development CA that a test-phase server trusts while dev.appAttestAuthority is on (each subcommand warns on stderr when the configuration turns it off).",
        subcommands: [Attest.self, Assert.self]
    )

    struct DeviceOptions: ParsableArguments {
        @Option(help: "The walker id the device belongs to: 1 to 128 bytes in Unicode NFC, no control character.")
        var walker: String

        // A base64url nonce may begin with "-": the value after --nonce is taken as it is, never as an option.
        @Option(
            parsing: .unconditional,
            help: "The nonce from GET /health/attestation-nonce; clientDataHash is SHA256 of its UTF-8 text.")
        var nonce: String

        @Option(
            help:
                "Where the device's key and counter are kept. Default <data directory>/devices/<walker>.json (config key dataDirectory; by default the SQLite database's directory)."
        )
        var deviceFile: String?

        func validate() throws {
            if let problem = WalkerID.problem(walker) { throw ValidationError("--walker \(problem)") }
            guard !nonce.isEmpty, nonce.utf8.count <= 512 else {
                throw ValidationError("--nonce must be 1 to 512 bytes")
            }
            if let deviceFile, deviceFile.isEmpty { throw ValidationError("--device-file must not be empty") }
        }

        func path(in configuration: AppConfiguration) -> String {
            deviceFile ?? DevelopmentDevice.defaultPath(walkerId: walker, directory: configuration.dataDirectoryPath)
        }
    }

    struct Attest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Create a new device key, save it to the device file, and print its base64 App Attest attestation object (the attestationToken of an ios POST /health).",
            discussion:
                "Uses the first configured App ID (appAttest.teamId and appAttest.bundleIds; in test-phase STEPLEDGER.dev.stepledger.app when neither is set), in the production environment when appAttest.environment allows it. Replaces any device already saved in the file. The key id (base64) goes to stderr. Refused in production mode."
        )

        @OptionGroup var device: DeviceOptions
        @OptionGroup var common: CommonOptions

        func run() async throws {
            let configuration = try await common.loadTestPhase(refusing: "simulated devices")
            if let warning = configuration.developmentDeviceWarning { printWarning(warning) }
            let (simulated, attestationObject) = try await configuration.withStore(
                label: "stepd.device", migrate: true
            ) { store in
                try await DevelopmentDevice.attest(
                    walkerId: device.walker, nonce: device.nonce,
                    apps: configuration.appAttest.apps(mode: configuration.mode), store: store, now: Date())
            }
            try simulated.save(path: device.path(in: configuration))
            FileHandle.standardError.write(
                Data(
                    "keyId \(Data(simulated.keyIdentifier).base64EncodedString()) saved in \(device.path(in: configuration))\n"
                        .utf8))
            print(Data(attestationObject).base64EncodedString())
        }
    }

    struct Assert: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Print the base64 App Attest assertion of the device saved by `stepd device attest`, with its counter raised by one (the attestationToken of a later ios POST /health).",
            discussion: "The key id (base64) and the new counter go to stderr. Refused in production mode."
        )

        @OptionGroup var device: DeviceOptions
        @OptionGroup var common: CommonOptions

        func run() async throws {
            let configuration = try await common.loadTestPhase(refusing: "simulated devices")
            if let warning = configuration.developmentDeviceWarning { printWarning(warning) }
            var simulated = try DevelopmentDevice.load(path: device.path(in: configuration), walkerId: device.walker)
            let assertion = try simulated.nextAssertion(nonce: device.nonce)
            // Saved before printing: a counter that was never stored could be handed out twice.
            try simulated.save(path: device.path(in: configuration))
            FileHandle.standardError.write(
                Data("keyId \(Data(simulated.keyIdentifier).base64EncodedString()) counter \(simulated.counter)\n".utf8)
            )
            print(Data(assertion).base64EncodedString())
        }
    }
}
