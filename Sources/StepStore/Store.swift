import Foundation
import SQLKit
import StepDatabase
import Synchronization
import Tracing

/// The ledger's storage: a `Database` plus the typed operations of `StoreTransaction`, and the read replicas
/// that may serve reads (`Store+Replicas.swift`).
package struct Store: Sendable {
    package let database: any Database
    /// PostgreSQL streaming replicas for reads; nil (the default) sends every read to `database` and records
    /// nothing.
    package let replicas: ReadReplicas?
    /// On PostgreSQL, what this instance last wrote for each walker it served, so a walker's next ingest of the
    /// day can be written in one round trip (`cachedIngest`); nil on SQLite, whose ingest is one in-process unit.
    package let ingestCache: IngestStateCache?

    /// `cachingIngests` false plans every ingest from a read (for comparisons; the cache changes no outcome).
    package init(database: any Database, replicas: ReadReplicas? = nil, cachingIngests: Bool = true) {
        self.database = database
        self.replicas = replicas
        self.ingestCache = database.kind == .postgres && cachingIngests ? IngestStateCache() : nil
    }

    package var kind: DatabaseKind { database.kind }

    /// Runs `body` in one transaction. Engine failures that a retry may cure surface as `StoreError.unavailable`.
    package func transaction<T: Sendable>(
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        try await unit(inTransaction: true, recording: true, body)
    }

    /// `transaction`, run once more when it failed on a unique key a concurrent transaction had just taken
    /// (`StoreError.isConflict`, PostgreSQL only). For a body that checks for such a row before it writes (a
    /// dead job retried while an enqueue of its dedupe key commits): the second run sees the row and takes its
    /// other branch. Everything the first run did was rolled back; the body must have no other effects.
    package func transactionRerunOnConflict<T: Sendable>(
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        do {
            return try await transaction(body)
        } catch let error as StoreError where error.isConflict {
            return try await transaction(body)
        }
    }

    /// Runs `body` on one connection outside a transaction: each statement commits by itself (on SQLite the
    /// unit runs alone, outside any group commit).
    package func withoutTransaction<T: Sendable>(
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        try await unit(inTransaction: false, recording: true, body)
    }

    /// Removes the dead row versions of `table` now rather than at autovacuum's next visit (at most once a minute
    /// per database), for a table whose rows churn in front of its readers (the job queue); returns whether it
    /// did. PostgreSQL: `VACUUM (SKIP_LOCKED, TRUNCATE false)`, so a vacuum another session runs on the table is
    /// not waited for, and no exclusive lock is taken to cut empty pages off the table's end (under load one
    /// waited its 5 s for it and timed out; held, it would stop every writer of the table). A role that does not
    /// own the table gets a warning and nothing is done. SQLite keeps no dead versions: nothing to do.
    package func vacuum(_ table: String) async throws -> Bool {
        guard kind == .postgres else { return false }
        try await withoutTransaction { tx in
            try await tx.sql.raw("VACUUM (SKIP_LOCKED, TRUNCATE false) \(unsafeRaw: table)").run()
        }
        return true
    }

    /// One unit of work on the primary. With read replicas and `recording`, what it commits is recorded for the
    /// reads that follow (`recordingCommits`).
    func unit<T: Sendable>(
        inTransaction: Bool, recording: Bool, _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        try await withSpan(inTransaction ? "db.transaction" : "db.statements", ofKind: .client) { span in
            span.attributes["db.system"] = database.kind.tracingName
            if recording, let replicas, kind == .postgres {
                return try await recordingCommits(to: replicas, inTransaction: inTransaction, body)
            }
            if inTransaction { return try await database.transaction(typed(body)) }
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
    /// The unit's statements: `sql.raw("… \(bind: value) …")` builds a `SQLText`.
    package let sql: SQLTextRunner
    package let kind: DatabaseKind
    /// The walkers whose rows the unit wrote, noted where it takes a walker's lock; nil without read replicas.
    let written: WrittenWalkers?

    package init(sql: any SQLDatabase, kind: DatabaseKind) {
        self.init(sql: sql, kind: kind, written: nil)
    }

    init(sql: any SQLDatabase, kind: DatabaseKind, written: WrittenWalkers?) {
        self.sql = SQLTextRunner(sql)
        self.kind = kind
        self.written = written
    }

    /// `FOR UPDATE` where the engine has row locks; SQLite serialises writers instead.
    package var forUpdate: SQLText { kind == .postgres ? " FOR UPDATE" : "" }

    /// `FOR UPDATE SKIP LOCKED` where the engine has row locks, so concurrent claimers (a queue's workers) pass
    /// over each other's rows instead of waiting; SQLite's one writer makes claims exclusive anyway.
    package var forUpdateSkipLocked: SQLText { kind == .postgres ? " FOR UPDATE SKIP LOCKED" : "" }

    /// `FOR KEY SHARE` where the engine has row locks: holds a row against its deletion or a change of its key (an
    /// erasure) while another statement's row depends on it, without waiting on or blocking ordinary updates.
    package var forKeyShare: SQLText { kind == .postgres ? " FOR KEY SHARE" : "" }

    /// `column` is one of the values `subquery` selects. PostgreSQL gets them as an array, so it finds each through
    /// the column's index whatever the table's statistics say (with `IN (…)` its planner may read the whole table
    /// to join a few values); SQLite looks an `IN` list up through the index anyway.
    package func oneOf(_ column: SQLText, selectedBy subquery: SQLText) -> SQLText {
        kind == .postgres ? "\(column) = ANY (ARRAY(\(subquery)))" : "\(column) IN (\(subquery))"
    }

    package static func newID() -> String { StoreTransactionID.make() }
}

/// Row identifiers: UUIDs in lowercase text, time-ordered (version 7) for rows, wholly random (version 4) where
/// nothing may be told from the id.
package enum StoreTransactionID {
    /// A version-7 UUID: the first 48 bits are the Unix time in milliseconds, the other 74 (after the version and
    /// variant) random. Rows are keyed by `(walker_id, id)`, so an id that grows with time puts each of a walker's new
    /// rows at the end of its range in every such index: one page of each, the same for the walker's next row,
    /// rather than a random page among all of the walker's (docs/benchmarks.md, "Time-ordered row ids"). The time
    /// in the id is the row's creation time, which every such row also stores. Ids made in the same millisecond are
    /// not ordered among themselves.
    package static func make(at now: Date = Date()) -> String {
        var bytes = drawRandom()
        let milliseconds = UInt64(max(0, (now.timeIntervalSince1970 * 1000).rounded(.down)))
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * UInt64(5 - index))) }
        bytes[6] = bytes[6] & 0x0F | 0x70
        bytes[8] = bytes[8] & 0x3F | 0x80
        return text(bytes)
    }

    /// A version-4 UUID: 122 random bits, for an identifier that must not tell when it was made or collide within
    /// a millisecond (an erased walker's pseudonym).
    package static func makeRandom() -> String {
        var bytes = drawRandom()
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        return text(bytes)
    }

    /// 16 random bytes. They come from the kernel's generator, 512 bytes (32 ids) in one read of `/dev/urandom`:
    /// Foundation's `UUID()` opened, read and closed `/dev/urandom` for every id, three system calls on the
    /// SQLite writer's thread for each of an ingest's three rows; swift-crypto's `SymmetricKey(size:)`, used
    /// next, asks `SystemRandomNumberGenerator` for 8 bytes at a time, one `getrandom` each: 64 system calls per
    /// draw, about five per ingest and 40 % of all of `stepd`'s. Row ids are not secrets, so holding the next few
    /// in memory gives nothing away.
    private static func drawRandom() -> [UInt8] {
        random.withLock { pool in
            if pool.offset + 16 > pool.bytes.count {
                pool.bytes = randomBytes(512)
                pool.offset = 0
            }
            defer { pool.offset += 16 }
            return Array(pool.bytes[pool.offset..<pool.offset + 16])
        }
    }

    /// `8-4-4-4-12` lowercase hex.
    private static func text(_ bytes: [UInt8]) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(36)
        for (index, byte) in bytes.enumerated() {
            if index == 4 || index == 6 || index == 8 || index == 10 { text.append(UInt8(ascii: "-")) }
            text.append(hexDigits[Int(byte >> 4)])
            text.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `count` random bytes from the kernel, in as few reads of `/dev/urandom` (kept open) as it answers (one
    /// for 512 bytes); through `SystemRandomNumberGenerator` if it cannot be read.
    static func randomBytes(_ count: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var filled = 0
            while urandom >= 0, filled < count {
                let got = read(urandom, buffer.baseAddress! + filled, count - filled)
                if got > 0 {
                    filled += got
                } else if got < 0, errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            var generator = SystemRandomNumberGenerator()
            while filled < count {
                buffer[filled] = UInt8.random(in: .min ... .max, using: &generator)
                filled += 1
            }
            initialized = count
        }
    }

    /// The kernel's generator, opened once for the process (-1 if it cannot be).
    private static let urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC)

    /// Random bytes drawn but not yet used, from `offset` on.
    private static let random = Mutex<(bytes: [UInt8], offset: Int)>(([], 0))

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
