import SQLKit

/// A position in PostgreSQL's write-ahead log (a `pg_lsn`): a byte offset, written as two hexadecimal halves
/// `X/Y` (the high and low 32 bits). Positions only grow on a primary, so comparing two says which is later.
package struct WALPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    package var offset: UInt64

    package static let zero = WALPosition(offset: 0)

    package init(offset: UInt64) {
        self.offset = offset
    }

    /// Parses PostgreSQL's text form (`16/B374D848`); nil for anything else.
    package init?(text: String) {
        let halves = text.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2, let high = Self.half(halves[0]), let low = Self.half(halves[1]) else { return nil }
        offset = UInt64(high) << 32 | UInt64(low)
    }

    private static func half(_ text: Substring) -> UInt32? {
        guard (1...8).contains(text.count), text.allSatisfy(\.isHexDigit) else { return nil }
        return UInt32(text, radix: 16)
    }

    package var description: String {
        String(offset >> 32, radix: 16, uppercase: true) + "/"
            + String(offset & 0xFFFF_FFFF, radix: 16, uppercase: true)
    }

    package static func < (lhs: WALPosition, rhs: WALPosition) -> Bool { lhs.offset < rhs.offset }
}

extension WALPosition {
    /// Where the primary inserts its next WAL record. Read after a `COMMIT` has returned, it is at or past the end
    /// of that commit's record: the record was inserted before the commit returned. The insert position rather
    /// than `pg_current_wal_lsn()` (how far WAL has been written out) because with `synchronous_commit = off` a
    /// commit returns before its record is written, so the write position can still be short of it. It may be a
    /// little past the commit (other sessions' records), which only asks a replica to be a little further on.
    package static func primaryInsertPosition(on sql: any SQLDatabase) async throws -> WALPosition {
        try await read("SELECT pg_current_wal_insert_lsn()::text AS lsn", on: sql)
    }

    /// How far a standby has replayed the WAL it received: what a query on it sees. Nil on a server that is not
    /// in recovery (a primary, or a standby promoted since), which then is no replica at all. A promoted standby
    /// still answers `pg_last_wal_replay_lsn()` with the last position it replayed (it is NULL only on a server
    /// that never was in recovery), so the question is asked of `pg_is_in_recovery()` first: read as a replica, a
    /// promoted server would serve a view that no longer follows the primary.
    package static func replayPosition(on sql: any SQLDatabase) async throws -> WALPosition? {
        let query: SQLQueryString =
            "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END AS lsn"
        guard let row = try await sql.raw(query).first(),
            let text = try row.decode(column: "lsn", as: String?.self)
        else { return nil }
        guard let position = WALPosition(text: text) else {
            throw StoreError.corrupt("pg_last_wal_replay_lsn() gave an unreadable position")
        }
        return position
    }

    private static func read(_ query: SQLQueryString, on sql: any SQLDatabase) async throws -> WALPosition {
        guard let row = try await sql.raw(query).first(),
            let position = WALPosition(text: try row.decode(column: "lsn", as: String.self))
        else { throw StoreError.corrupt("the server gave no readable WAL position") }
        return position
    }
}
