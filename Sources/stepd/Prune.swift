import ArgumentParser
import Foundation
import Logging
import StepDatabase
import StepSettings
import StepStore

struct Prune: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Delete rows past retention (attestation logs, idempotency keys, rate-limit windows) once.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let configuration = try await common.load()
        let store = try await StoreFactory.open(
            url: configuration.databaseURL, postgres: configuration.postgres, logger: Logger(label: "stepd.prune"),
            migrate: false)
        let report = try await store.prune(now: Date(), retention: configuration.retention)
        try await store.database.close()
        print(
            "pruned \(report.attestationLogs) attestation logs, \(report.idempotencyKeys) idempotency keys, \(report.rateLimits) rate-limit windows, \(report.healthNonces) health nonces"
        )
    }
}
