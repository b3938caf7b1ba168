import ArgumentParser
import Logging
import StepDatabase
import StepSettings
import StepStore

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending schema migrations and report what was done.")

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let configuration = try await common.load()
        let store = try await StoreFactory.open(
            url: configuration.databaseURL, postgres: configuration.postgres, logger: Logger(label: "stepd.migrate"),
            migrate: false)
        let report = try await Migrator(database: store.database).migrate()
        try await store.database.close()
        if report.applied.isEmpty {
            print("schema is up to date (version \(report.current))")
        } else {
            print(
                "applied migrations \(report.applied.map(String.init).joined(separator: ", ")); schema version \(report.current)"
            )
        }
    }
}
