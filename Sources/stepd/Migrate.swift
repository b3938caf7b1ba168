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
        let report = try await configuration.withStore(label: "stepd.migrate") { store in
            try await Migrator(database: store.database).migrate()
        }
        if report.applied.isEmpty {
            print("schema is up to date (version \(report.current))")
        } else {
            print(
                "applied migrations \(report.applied.map(String.init).joined(separator: ", ")); schema version \(report.current)"
            )
        }
    }
}
