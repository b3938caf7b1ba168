import ArgumentParser
import Foundation
import Logging
import StepCore
import StepDatabase
import StepStore

/// `stepbench pgbench-script`: prints the pgbench script of one accepted ingest, built from the statements
/// the server executes (`PostgresIngestScript`), so the database-alone comparison runs the same SQL.
struct PgbenchScript: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pgbench-script",
        abstract: "Print the pgbench script of one accepted ingest, rendered from the server's own statements.",
        discussion: """
            Connects to the PostgreSQL database only to serialise the statements in its dialect; nothing is \
            written. Each pgbench client is one walker (pgbench-<client_id>), each transaction a new idempotency \
            key for today (UTC). Use with: pgbench -n -M prepared -D version=0 -D lifetime=0 -c N -j 2 -T S -f <script> <url>
            """)

    @Option(help: "postgres:// URL of the database the script will run against.")
    var database: String

    func validate() throws {
        guard StoreFactory.isPostgres(database) else { throw ValidationError("--database must be a postgres:// URL") }
        try BenchDatabase.check(database)
    }

    func run() async throws {
        let store = try await StoreFactory.open(url: database, logger: Logger(label: "stepbench"), migrate: false)
        let now = Date()
        let script = try await store.database.withConnection { sql in
            PostgresIngestScript.render(using: sql, day: LocalDate(instant: now, in: .gmt), now: now)
        }
        try await store.database.close()
        print(script, terminator: "")
    }
}
