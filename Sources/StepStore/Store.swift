import Foundation
import SQLKit

/// The ledger's storage: a `Database` plus the typed operations of `StoreTransaction`.
package struct Store: Sendable {
    package let database: any Database

    package init(database: any Database) {
        self.database = database
    }

    package var kind: DatabaseKind { database.kind }

    /// Runs `body` in one transaction. Engine failures that a retry may cure surface as `StoreError.unavailable`.
    package func transaction<T: Sendable>(
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        let kind = database.kind
        return try await database.transaction { sql in
            try await body(StoreTransaction(sql: sql, kind: kind))
        }
    }

    /// Runs `body` on one connection outside a transaction: each statement commits by itself (on SQLite the
    /// unit runs alone, outside any group commit).
    package func withoutTransaction<T: Sendable>(
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        let kind = database.kind
        return try await database.withConnection { sql in
            try await body(StoreTransaction(sql: sql, kind: kind))
        }
    }
}

/// The typed SQL of one transaction. Feature files extend it (`StoreTransaction+StepLog.swift`, …).
package struct StoreTransaction: Sendable {
    package let sql: any SQLDatabase
    package let kind: DatabaseKind

    /// `FOR UPDATE` where the engine has row locks; SQLite serialises writers instead.
    var forUpdate: SQLQueryString { kind == .postgres ? " FOR UPDATE" : "" }

    static func newID() -> String { StoreTransactionID.make() }
}

/// Random row identifiers.
package enum StoreTransactionID {
    package static func make() -> String { UUID().uuidString.lowercased() }
}
