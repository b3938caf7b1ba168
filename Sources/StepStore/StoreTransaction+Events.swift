import Foundation
import SQLKit
import StepDatabase

/// One event of a walker's log, as the app reads it: `seq` is its id and the cursor after it.
package struct WalkerEvent: Sendable, Hashable {
    package var walkerId: String
    package var seq: Int
    package var type: String
    /// The event's data, a JSON object's text.
    package var data: String
    package var createdAt: Date
}

extension StoreTransaction {
    /// Appends an event to the walker's log and returns it with its sequence number: the larger of one above the
    /// walker's last and the time it is written, in milliseconds since 1970. So ids keep rising even when the log
    /// lost its newest events (a restore from a backup) or all of them (an erasure, after which the same id may
    /// walk again): a device's or a webhook receiver's cursor from before never hides a new event. Under the
    /// walker's lock (taken by the caller), so two appends never pick the same number; the primary key refuses it
    /// if they did.
    package func appendEvent(walkerId: String, type: String, data: String, at now: Date) async throws
        -> WalkerEvent
    {
        let time = now.millisecondsSince1970
        // The larger of two values: GREATEST on PostgreSQL, the two-argument MAX on SQLite.
        let greatest: SQLText = kind == .postgres ? "GREATEST" : "MAX"
        let row = try await sql.raw(
            """
            INSERT INTO walker_events (walker_id, seq, type, data, created_at)
            SELECT \(bind: walkerId), \(greatest)(COALESCE(MAX(seq), 0) + 1, \(bind: time)), \(bind: type),
                \(bind: data), \(bind: time)
            FROM walker_events WHERE walker_id = \(bind: walkerId)
            RETURNING seq
            """
        ).first()
        guard let seq = try row?.decode(column: "seq", as: Int.self) else {
            throw StoreError.corrupt("event insert returned no sequence")
        }
        // Streams waiting on any instance are woken when this transaction commits (NOTIFY is transactional).
        if kind == .postgres {
            try await sql.raw("SELECT pg_notify(\(bind: EventChannel.name), \(bind: walkerId))").run()
        }
        return WalkerEvent(walkerId: walkerId, seq: seq, type: type, data: data, createdAt: now)
    }

    /// The walker's events after `seq`, oldest first, at most `limit`.
    package func events(walkerId: String, after seq: Int, limit: Int) async throws -> [WalkerEvent] {
        let rows = try await sql.raw(
            """
            SELECT seq, type, data, created_at FROM walker_events
            WHERE walker_id = \(bind: walkerId) AND seq > \(bind: seq)
            ORDER BY seq LIMIT \(bind: limit)
            """
        ).all()
        return try rows.map { row in
            WalkerEvent(
                walkerId: walkerId, seq: try row.decode(column: "seq", as: Int.self),
                type: try row.decode(column: "type", as: String.self),
                data: try row.decode(column: "data", as: String.self),
                createdAt: Date(millisecondsSince1970: try row.decode(column: "created_at", as: Int.self)))
        }
    }

    package func event(walkerId: String, seq: Int) async throws -> WalkerEvent? {
        try await events(walkerId: walkerId, after: seq - 1, limit: 1).first { $0.seq == seq }
    }
}

/// The PostgreSQL notification channel of new walker events; the payload is the walker's id.
package enum EventChannel {
    package static let name = "stepledger_events"
}

extension StoreTransaction {
    /// The newest event's sequence number of each of `walkerIds` that has events (the streams' safety net).
    package func newestEventSeqs(walkerIds: [String]) async throws -> [String: Int] {
        guard !walkerIds.isEmpty else { return [:] }
        let query: SQLText =
            kind == .postgres
            ? "SELECT walker_id, MAX(seq) AS seq FROM walker_events WHERE walker_id = ANY(\(bind: walkerIds)) GROUP BY walker_id"
            : "SELECT walker_id, MAX(seq) AS seq FROM walker_events WHERE walker_id IN (\(binds: walkerIds)) GROUP BY walker_id"
        var newest: [String: Int] = [:]
        for row in try await sql.raw(query).all() {
            newest[try row.decode(column: "walker_id", as: String.self)] = try row.decode(column: "seq", as: Int.self)
        }
        return newest
    }
}
