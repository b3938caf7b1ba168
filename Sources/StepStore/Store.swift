import Crypto
import Foundation
import SQLKit
import StepDatabase
import Tracing

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
        try await withSpan("db.transaction", ofKind: .client) { span in
            span.attributes["db.system"] = database.kind.tracingName
            return try await database.transaction(typed(body))
        }
    }

    /// Runs `body` on one connection outside a transaction: each statement commits by itself (on SQLite the
    /// unit runs alone, outside any group commit).
    package func withoutTransaction<T: Sendable>(
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        try await withSpan("db.statements", ofKind: .client) { span in
            span.attributes["db.system"] = database.kind.tracingName
            return try await database.withConnection(typed(body))
        }
    }

    /// `body` as the database runs it: on the connection it is given, typed for this store's engine.
    private func typed<T: Sendable>(
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) -> @Sendable (any SQLDatabase) async throws -> T {
        let kind = database.kind
        return { sql in try await body(StoreTransaction(sql: sql, kind: kind)) }
    }
}

/// The typed SQL of one transaction. Feature files extend it (`StoreTransaction+StepLog.swift`, …).
package struct StoreTransaction: Sendable {
    package let sql: any SQLDatabase
    package let kind: DatabaseKind

    /// `FOR UPDATE` where the engine has row locks; SQLite serialises writers instead.
    package var forUpdate: SQLQueryString { kind == .postgres ? " FOR UPDATE" : "" }

    /// `FOR UPDATE SKIP LOCKED` where the engine has row locks, so concurrent claimers (a queue's workers) pass
    /// over each other's rows instead of waiting; SQLite's one writer makes claims exclusive anyway.
    package var forUpdateSkipLocked: SQLQueryString { kind == .postgres ? " FOR UPDATE SKIP LOCKED" : "" }

    package static func newID() -> String { StoreTransactionID.make() }
}

/// Random row identifiers: version-4 UUIDs in lowercase text.
package enum StoreTransactionID {
    /// The random bits come from BoringSSL's generator, seeded by the kernel and run in the process:
    /// Foundation's `UUID()` opened, read and closed `/dev/urandom` for every id, three system calls on the
    /// SQLite writer's thread for each of an ingest's three rows.
    package static func make() -> String {
        var bytes = SymmetricKey(size: .init(bitCount: 128)).withUnsafeBytes { Array($0) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(hexDigits[Int(byte >> 4)])
            text.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
}

extension DatabaseKind {
    /// OpenTelemetry's `db.system` value.
    var tracingName: String {
        switch self {
        case .sqlite: "sqlite"
        case .postgres: "postgresql"
        }
    }
}
