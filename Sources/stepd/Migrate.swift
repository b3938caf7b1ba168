import ArgumentParser
import Logging
import StepDatabase
import StepSettings
import StepStore
import Synchronization

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending schema migrations and report what was done.")

    @OptionGroup var common: CommonOptions

    @Option(
        help: """
            PostgreSQL: how long one statement of a migration may run, in seconds (1 to 86400). A migration that \
            rebuilds a key or an index reads the whole table; database.statementTimeoutMs is sized for requests.
            """)
    var statementTimeout = 3_600

    @Flag(
        help: """
            Migrate a database that holds other applications' tables and no StepLedger schema yet (one shared on \
            purpose). Without it such a database is refused: its URL is likely the wrong one.
            """)
    var otherTables = false

    func validate() throws {
        guard (1...86_400).contains(statementTimeout) else {
            throw ValidationError("--statement-timeout must be 1 to 86400 seconds")
        }
    }

    func run() async throws {
        var configuration = try await common.load()
        configuration.postgres = configuration.postgres.withStatementTimeout(atLeastSeconds: statementTimeout)
        let committed = Mutex<[Int]>([])
        let (report, newest) = try await configuration.withStore(label: "stepd.migrate", current: false) { store in
            var migrator = Migrator(database: store.database)
            // A migration waiting behind other sessions' locks tries again in turns of `lock_timeout` for as long
            // as one of its statements may run.
            migrator.lockTimeout = 2_000
            migrator.lockRetrySeconds = Double(statementTimeout)
            migrator.allowsOtherTables = otherTables
            let report: MigrationReport
            do {
                report = try await migrator.migrate(applied: { version in committed.withLock { $0.append(version) } })
            } catch {
                // Each migration commits on its own: say what this run applied before the one that failed.
                let done = committed.withLock { $0 }
                if !done.isEmpty {
                    printWarning(
                        "applied migrations \(done.map(String.init).joined(separator: ", ")) before the failure")
                }
                throw error
            }
            let applied = try await migrator.appliedVersions()
            // A database migrated by a newer build (going back a release, a restore): this binary knows nothing
            // past its own, and is refused when a newer migration may not run beside the builds before it.
            if (applied.max() ?? 0) > report.current { try await migrator.requireCurrent() }
            return (report, applied.max() ?? 0)
        }
        if newest > report.current {
            printWarning(
                "the database's schema is at version \(newest), newer than this build's \(report.current), and this "
                    + "build may run on it: nothing to do")
        } else if report.applied.isEmpty {
            print("schema is up to date (version \(report.current))")
        } else {
            print(
                "applied migrations \(report.applied.map(String.init).joined(separator: ", ")); schema version \(report.current)"
            )
        }
    }
}
