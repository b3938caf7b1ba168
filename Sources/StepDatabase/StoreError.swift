/// Errors the store reports to its callers. A struct around a private code, so new codes never break callers.
package struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case unavailable
        case connectionLost
        case schemaBehind
        case schemaAhead
        case invalidConfiguration
        case corrupt
        case conflict
        case lockTimeout
        case deadlock
    }

    private let code: Code
    package let detail: String

    private init(_ code: Code, _ detail: String) {
        self.code = code
        self.detail = detail
    }

    /// The database could not be reached or refused the work; the caller may retry later (HTTP 503).
    package static func unavailable(_ detail: String) -> StoreError { .init(.unavailable, detail) }
    /// `unavailable` because the connection the work ran on was closed under it (the server ended the session,
    /// or the socket went): what was sent may or may not have committed, and the next connection may work.
    package static func connectionLost(_ detail: String) -> StoreError { .init(.connectionLost, detail) }
    package static func schemaBehind(_ detail: String) -> StoreError { .init(.schemaBehind, detail) }
    /// A newer build applied a migration that builds before it may not run beside (`Migration.mixes`).
    package static func schemaAhead(_ detail: String) -> StoreError { .init(.schemaAhead, detail) }
    package static func invalidConfiguration(_ detail: String) -> StoreError { .init(.invalidConfiguration, detail) }
    /// A stored value could not be read back as written.
    package static func corrupt(_ detail: String) -> StoreError { .init(.corrupt, detail) }

    /// A concurrent transaction committed a row with the same unique key first (PostgreSQL's SQLSTATE 23505,
    /// which READ COMMITTED allows between a check and the write). Nothing was written; a unit that checks for
    /// that row before it writes finds it when run again (`Store.transactionRerunOnConflict`).
    package static func conflict(_ detail: String) -> StoreError { .init(.conflict, detail) }

    /// A statement waited for a lock longer than `lock_timeout` (PostgreSQL's SQLSTATE 55P03) and was cancelled;
    /// nothing of its transaction was written, and it may be run again. `unavailable` to a caller that does not ask
    /// (a request answers 503 with `Retry-After`, as for a statement timeout: a role may set `lock_timeout`).
    package static func lockTimeout(_ detail: String) -> StoreError { .init(.lockTimeout, detail) }

    /// PostgreSQL ended the transaction to break a deadlock (SQLSTATE 40P01): nothing of it was written, and it may
    /// be run again. `unavailable` to a caller that does not ask (a request answers 503).
    package static func deadlock(_ detail: String) -> StoreError { .init(.deadlock, detail) }

    package var isUnavailable: Bool {
        code == .unavailable || code == .connectionLost || code == .deadlock || code == .lockTimeout
    }
    package var isDeadlock: Bool { code == .deadlock }
    package var isConnectionLost: Bool { code == .connectionLost }
    package var isLockTimeout: Bool { code == .lockTimeout }
    package var isConflict: Bool { code == .conflict }
    package var isSchemaBehind: Bool { code == .schemaBehind }
    package var isSchemaAhead: Bool { code == .schemaAhead }
    /// A setting, or the database role's privileges, the operator must mend; its detail names no value.
    package var isInvalidConfiguration: Bool { code == .invalidConfiguration }

    package var description: String { detail }
}
