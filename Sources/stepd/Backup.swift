import ArgumentParser
import Foundation
import StepDatabase
import StepSettings

/// `stepd backup --to FILE`: a consistent copy of the configured SQLite database, taken while it serves.
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy the SQLite database consistently while it serves (PostgreSQL: see docs/operations.md).",
        discussion: """
            Reads one snapshot on a connection of its own (SQLite's VACUUM INTO), so a running server keeps \
            serving; the copy is checked, fsynced and renamed into place. To restore: stop every stepd serve and \
            stepd worker on the database; move the database file aside with its -wal and -shm files (a WAL left \
            beside the restored file would be applied to it); copy the backup into its place; run stepd migrate; \
            start the servers and workers again (docs/operations.md).
            """)

    @Option(help: "The file to write; refused if it exists, unless --force.")
    var to: String

    @Flag(help: "Replace FILE if it exists.")
    var force = false

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let configuration = try await common.load()
        // The file itself (a `file:` URI read as its path): the copy opens it on a connection of its own.
        guard let path = DatabaseOpener.sqliteFilePath(configuration.databaseURL) else {
            throw CommandFailure(
                "stepd backup copies SQLite databases only; back up PostgreSQL with pg_dump -Fc, or base backups and WAL archiving (docs/operations.md, Backups)"
            )
        }
        let started = ContinuousClock.now
        do {
            let report = try await SQLiteBackup.copy(databaseAt: path, to: to, replacing: force)
            let seconds = (ContinuousClock.now - started) / .seconds(1)
            print("backed up \(path) to \(to): \(report.bytes) bytes in \(String(format: "%.2f", seconds)) s")
        } catch let failure as SQLiteBackup.Failure {
            throw CommandFailure(failure.description)
        }
    }
}
