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

        package enum Key: String, ConfigurationKeys {
            case url, maxConnections, connectTimeoutSeconds, statementTimeoutMs, sqliteSynchronous
            package static let section = "database"
            package var isSecret: Bool {
                switch self {
                case .url: true
                case .maxConnections, .connectTimeoutSeconds, .statementTimeoutMs, .sqliteSynchronous: false
                }
            }
        }

        package init() {}

        package init(reader config: ConfigReader) throws {
            let reader = SettingsReader<Key>(config)
            url = try reader.string(.url) ?? url
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
        }
    }
}

extension AppConfiguration {
    /// The database as the start line names it: a SQLite path, or a PostgreSQL URL without its user and password.
    package var databaseDescription: String {
        guard DatabaseOpener.isPostgres(database.url), var components = URLComponents(string: database.url) else {
            return database.url
        }
        components.user = nil
        components.password = nil
        components.query = nil
        return components.string ?? "postgres://…"
    }
}
