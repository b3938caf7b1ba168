import ArgumentParser
import Foundation
import Logging
import StepDatabase
import StepSettings
import StepStore

struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Delete rows past retention (attestation logs, idempotency keys, rate-limit windows, health nonces, walker events, step submissions) once."
    )

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let configuration = try await common.load()
        let report = try await configuration.withStore(label: "stepd.prune") { store in
            try await store.prune(now: Date(), retention: configuration.retention)
        }
        print(
            "pruned \(report.attestationLogs) attestation logs, \(report.idempotencyKeys) idempotency keys, \(report.rateLimits) rate-limit windows, \(report.healthNonces) health nonces, \(report.walkerEvents) walker events, \(report.stepSubmissions) step submissions"
        )
    }
}
