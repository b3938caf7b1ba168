import Configuration
import Foundation
import StepDatabase
import StepStore

extension AppConfiguration {
    /// `database.*`: where the ledger lives and how the engine is driven.
    package struct Database: ConfigurationSection {
        /// A SQLite file path or a `postgres://` URL (which may carry a password: a secret).
        package var url = "./stepledger.sqlite"
        package var postgres = PostgresSettings()
        package var sqliteSynchronous = SQLiteSynchronous.full
        /// `postgres://` URLs of streaming standbys of `url` that may serve reads (secret, like `url`); empty: none.
        package var readReplicas: [String] = []

        package enum Key: String, ConfigurationKeys {
            case url, maxConnections, connectTimeoutSeconds, statementTimeoutMs, sqliteSynchronous, readReplicas
            package static let section = "database"
            package var isSecret: Bool {
                switch self {
                case .url, .readReplicas: true
                case .maxConnections, .connectTimeoutSeconds, .statementTimeoutMs, .sqliteSynchronous: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            url = try reader.string(.url) ?? url
            if let problem = DatabaseOpener.problem(url) { throw reader.error(.url, problem) }
            postgres.maximumConnections = try reader.int(.maxConnections, in: 1...512) ?? postgres.maximumConnections
            postgres.connectTimeoutSeconds =
                try reader.int(.connectTimeoutSeconds, in: 1...300) ?? postgres.connectTimeoutSeconds
            postgres.statementTimeoutMilliseconds =
                try reader.int(.statementTimeoutMs, in: 100...600_000) ?? postgres.statementTimeoutMilliseconds
            if let synchronous = try reader.string(.sqliteSynchronous) {
                guard let parsed = SQLiteSynchronous(rawValue: synchronous.uppercased()) else {
                    throw reader.error(.sqliteSynchronous, "must be FULL or NORMAL")
                }
                sqliteSynchronous = parsed
            }
            if let replicas = try reader.list(.readReplicas, of: "postgres:// URL") {
                guard DatabaseOpener.isPostgres(url) else {
                    throw reader.error(
                        .readReplicas, "needs a PostgreSQL database.url: a SQLite database has no replicas")
                }
                // The entry is not shown: a URL may carry a password.
                for (index, replica) in replicas.enumerated() {
                    do {
                        _ = try PostgresURL(parsing: replica)
                    } catch {
                        throw reader.error(.readReplicas, "entry \(index + 1): \(error.detail)")
                    }
                }
                readReplicas = replicas
            }
        }
    }
}

extension AppConfiguration {
    /// The database as the start line names it: a SQLite path, or a PostgreSQL URL without its user, password and
    /// options but with its socket folder, if any.
    /// With read replicas, their addresses follow (`…, read replicas 10.0.0.2:5432, 10.0.0.3:5432`).
    package var databaseDescription: String {
        guard DatabaseOpener.isPostgres(database.url) else { return database.url }
        let primary = Self.withoutCredentials(database.url)
        guard !database.readReplicas.isEmpty else { return primary }
        let replicas = database.readReplicas.map { url in
            (try? PostgresURL(parsing: url))?.addressDescription ?? "?"
        }
        return primary + ", read replicas " + replicas.joined(separator: ", ")
    }

    private static func withoutCredentials(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return "postgres://…" }
        components.user = nil
        components.password = nil
        // The socket folder (`?host=/path`) is kept: it is the address, not a secret.
        let socketFolder = components.queryItems?.filter { $0.name == "host" } ?? []
        components.queryItems = socketFolder.isEmpty ? nil : socketFolder
        return components.string ?? "postgres://…"
    }
}
