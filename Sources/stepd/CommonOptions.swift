import ArgumentParser
import Foundation
import Logging
import StepCore
import StepDatabase
import StepSettings
import StepStore

/// Options every subcommand shares. Each overrides the same key from the environment or the config file.
struct CommonOptions: ParsableArguments {
    @Option(help: "SQLite file path or postgres:// URL (config key database.url, env STEPLEDGER_DATABASE_URL).")
    var database: String?

    @Option(help: "test-phase or production (config key mode, env STEPLEDGER_MODE).")
    var mode: String?

    @Option(help: "A JSON configuration file; environment variables override it, options override both.")
    var config: String?

    /// Reads configuration strictly: command line, then STEPLEDGER_* environment variables, then the file. Its
    /// errors are `ConfigurationError` or `ConfigurationSourceError`, which `Stepd.main` prints as one line.
    func load(overrides: [String: String] = [:]) async throws -> AppConfiguration {
        var commandLine = overrides
        if let database { commandLine["database.url"] = database }
        if let mode { commandLine["mode"] = mode }
        return try ConfigurationSources(
            commandLine: commandLine, environment: ProcessInfo.processInfo.environment, file: config
        ).load()
    }

    /// `load()`, refused unless the mode is test-phase: `what` names the development-only thing refused.
    func loadTestPhase(refusing what: String) async throws -> AppConfiguration {
        let configuration = try await load()
        guard configuration.mode == .testPhase else {
            throw CommandFailure("\(what) are refused in production mode")
        }
        return configuration
    }
}

/// One line on stderr, beside a command's output on stdout.
func printWarning(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

extension AppConfiguration {
    /// Opens the configured database (migrating it only when asked: operators run `stepd migrate`), runs `body`
    /// with it, and closes it again whether `body` returns or throws.
    /// Unless it migrates or is `stepd migrate` itself (`current: false`), a command works on a database that is
    /// there and current: a SQLite path that names no file is refused rather than created empty (a forgotten
    /// `--config` would otherwise report "nothing found" from a new, empty file), and so is a schema behind this
    /// build, as `serve` and `worker` refuse it. One that migrates (test-phase `token` and `device`) then checks the
    /// schema too: a newer build's, past what this one may run beside, is refused as `serve` refuses it.
    func withStore<Result>(
        label: String, migrate: Bool = false, current: Bool = true, _ body: (Store) async throws -> Result
    ) async throws -> Result {
        let checked = current && !migrate
        if checked { try requireExistingDatabase() }
        let store = try await StoreFactory.open(
            url: databaseURL, postgres: postgres, logger: Logger(label: label), migrate: migrate)
        return try await store.closing(after: { store in
            if current { try await Migrator(database: store.database).requireCurrent() }
            return try await body(store)
        })
    }

    /// Refuses a SQLite path (bare or `sqlite://`) that names no file, before anything opens it: SQLite would create
    /// it empty, and a mistyped path or a forgotten `--config` would then report "nothing found", or "run `stepd
    /// migrate`", from a new file that migrating would turn into an empty database beside the real one. The commands
    /// that work on a database that is there ask this first (`withStore` unless it migrates, `worker`, production
    /// `serve`); those that migrate (`stepd migrate`, test-phase `serve`, `token` and `device`) create the file. A URL that is not well-formed is left to the opener, which never repeats it (it may hold a
    /// password). A `file:` URI is checked for the file it names, read as SQLite reads it, unless it names an
    /// in-memory database (`mode=memory`, `:memory:`), which has no file.
    func requireExistingDatabase() throws {
        guard DatabaseOpener.problem(databaseURL) == nil, let given = DatabaseOpener.sqlitePath(databaseURL),
            let path = DatabaseOpener.sqliteFilePath(databaseURL), !Self.namesMemory(uri: given, path: path),
            !FileManager.default.fileExists(atPath: path)
        else { return }
        throw CommandFailure("no database at \(given): name the server's with --database or --config (database.url)")
    }

    /// Whether a SQLite path names an in-memory database: `:memory:`, or a `file:` URI whose path is empty or
    /// `:memory:` or whose query says `mode=memory`.
    private static func namesMemory(uri: String, path: String) -> Bool {
        if path.isEmpty || path == ":memory:" { return true }
        // SQLite reads the URI up to a `#`: a query after one is no query.
        let read = uri.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        guard uri.hasPrefix("file:"), let query = read.split(separator: "?", maxSplits: 1).dropFirst().first else {
            return false
        }
        return query.split(separator: "&").contains("mode=memory")
    }
}
