import Foundation
import SQLKit
import StepDatabase

/// What claiming an idempotency key found.
package enum IdempotencyClaim: Sendable, Hashable {
    /// The key is ours to process; complete or release it.
    case claimed
    /// The key finished earlier with the same payload: replay this response.
    case replay(status: Int, body: String)
    /// The key was used with a different payload.
    case payloadMismatch
    /// Another request holds the key and its lease has not run out.
    case inFlight
}

extension StoreTransaction {
    /// Claims `key` for `requestHash`, or reports who has it. A claim whose lease ran out (its worker died)
    /// is taken over.
    package func claimIdempotencyKey(
        walkerId: String, key: String, requestHash: String, now: Date, leaseSeconds: Double
    ) async throws -> IdempotencyClaim {
        let inserted = try await sql.raw(
            Self.claimIdempotencyKeyStatement(
                walkerId: walkerId, key: key, requestHash: requestHash, now: now, leaseSeconds: leaseSeconds)
        ).first()
        if inserted != nil { return .claimed }
        return try await existingIdempotencyKey(
            walkerId: walkerId, key: key, requestHash: requestHash, now: now, leaseSeconds: leaseSeconds)
    }

    /// Inserts the key as in flight unless it exists; returns a row when it was inserted. `when` adds a
    /// condition (the admission claims only within the rate limit).
    /// With `answer`, the key is inserted done with that answer instead, for a statement whose other writes
    /// apply exactly when the key is inserted with it (`cachedIngestStatement`); with `answered` too, only when that
    /// condition holds, else in flight.
    static func claimIdempotencyKeyStatement(
        walkerId: String, key: String, requestHash: String, now: Date, leaseSeconds: Double,
        when condition: SQLText = "true", answer: (status: Int, body: String)? = nil, answered: SQLText? = nil
    ) -> SQLText {
        let nowMs = now.millisecondsSince1970
        let leaseUntil = IdempotencyRequest.leaseEnd(now: now, leaseSeconds: leaseSeconds)
        var query: SQLText = """
            INSERT INTO idempotency_keys (walker_id, idem_key, request_hash, state, status, response_body, created_at,
                lease_until)
            SELECT \(bind: walkerId), \(bind: key), \(bind: requestHash),
            """
        if let answer, let answered {
            query += " CASE WHEN " + answered + " THEN 'done' ELSE 'in_flight' END,\n    CASE WHEN " + answered
            query += " THEN \(bind: answer.status) END, CASE WHEN " + answered + " THEN \(bind: answer.body) END,"
        } else if let answer {
            query += " 'done', \(bind: answer.status), \(bind: answer.body),"
        } else {
            query += " 'in_flight', NULL, NULL,"
        }
        query += """
             \(bind: nowMs), \(bind: leaseUntil)
            WHERE 
            """
        query += condition
        query += """

            ON CONFLICT (walker_id, idem_key) DO NOTHING
            RETURNING idem_key
            """
        return query
    }

    /// What an existing key means for a request with `requestHash`: a replay, a mismatch, a request still in
    /// flight, or, when its lease ran out, a claim taken over.
    func existingIdempotencyKey(
        walkerId: String, key: String, requestHash: String, now: Date, leaseSeconds: Double
    ) async throws -> IdempotencyClaim {
        let nowMs = now.millisecondsSince1970
        let leaseUntil = IdempotencyRequest.leaseEnd(now: now, leaseSeconds: leaseSeconds)
        // Deleted between the two statements (a release): the caller may simply retry.
        guard let stored = try await storedIdempotencyKey(walkerId: walkerId, key: key) else { return .inFlight }
        guard stored.requestHash == requestHash else { return .payloadMismatch }
        if let answer = stored.answer { return answer }
        let storedLease = stored.leaseUntil
        guard storedLease < nowMs else { return .inFlight }
        let taken = try await sql.raw(
            """
            UPDATE idempotency_keys SET lease_until = \(bind: leaseUntil)
            WHERE walker_id = \(bind: walkerId) AND idem_key = \(bind: key) AND state = 'in_flight'
                AND lease_until = \(bind: storedLease)
            RETURNING idem_key
            """
        ).first()
        return taken == nil ? .inFlight : .claimed
    }

    /// Stores the final response of a claimed key, in the same transaction as the work it describes.
    package func completeIdempotencyKey(walkerId: String, key: String, status: Int, body: String) async throws {
        try await sql.raw(
            Self.completeIdempotencyKeyStatement(walkerId: walkerId, key: key, status: status, body: body)
        )
        .run()
    }

    static func completeIdempotencyKeyStatement(
        walkerId: String, key: String, status: Int, body: String, when condition: SQLText = "true"
    ) -> SQLText {
        """
        UPDATE idempotency_keys SET state = 'done', status = \(bind: status), response_body = \(bind: body)
        WHERE walker_id = \(bind: walkerId) AND idem_key = \(bind: key) AND \(condition)
        """
    }

    /// Gives a claimed key back when the request ended in an outcome that is not stored (401, 403, 429, 5xx).
    /// With `leaseUntil`, only the claim that set that lease (`IdempotencyRequest.leaseEnd`): a request whose claim
    /// was taken over after its lease ran out must not give back the claim of the request that took it.
    /// True when a claim was given back.
    @discardableResult
    package func releaseIdempotencyKey(walkerId: String, key: String, leaseUntil: Int? = nil) async throws -> Bool {
        var query: SQLText = """
            DELETE FROM idempotency_keys
            WHERE walker_id = \(bind: walkerId) AND idem_key = \(bind: key) AND state = 'in_flight'
            """
        if let leaseUntil { query += " AND lease_until = \(bind: leaseUntil)" }
        query += " RETURNING 1 AS released"
        return try await !sql.raw(query).all().isEmpty
    }

    /// Whether the claim that set `leaseUntil` still holds `key`, checked under the key row's lock after the
    /// walker's (the order every ingest takes them), so it cannot be taken over until the transaction ends. When
    /// it does not hold, what the key is now: its stored answer (another request took the claim over and finished),
    /// a payload mismatch, or in flight (another request holds it, or gave it back).
    package func heldIdempotencyKey(walkerId: String, key: String, requestHash: String, leaseUntil: Int)
        async throws -> IdempotencyClaim
    {
        guard let stored = try await storedIdempotencyKey(walkerId: walkerId, key: key) else { return .inFlight }
        guard let answer = stored.answer else { return stored.leaseUntil == leaseUntil ? .claimed : .inFlight }
        return stored.requestHash == requestHash ? answer : .payloadMismatch
    }

    /// A key's row, locked: the payload it was claimed for, its lease, and its stored answer once done.
    private struct StoredIdempotencyKey {
        var requestHash: String
        var leaseUntil: Int
        /// The replay of the stored answer; nil while in flight.
        var answer: IdempotencyClaim?
    }

    private func storedIdempotencyKey(walkerId: String, key: String) async throws -> StoredIdempotencyKey? {
        guard
            let row = try await sql.raw(
                """
                SELECT request_hash, state, status, response_body, lease_until FROM idempotency_keys
                WHERE walker_id = \(bind: walkerId) AND idem_key = \(bind: key)\(forUpdate)
                """
            ).first()
        else { return nil }
        var answer: IdempotencyClaim?
        if try row.decode(column: "state", as: String.self) == "done" {
            guard let status = try row.decode(column: "status", as: Int?.self),
                let body = try row.decode(column: "response_body", as: String?.self)
            else { throw StoreError.corrupt("finished idempotency key without a response") }
            answer = .replay(status: status, body: body)
        }
        return StoredIdempotencyKey(
            requestHash: try row.decode(column: "request_hash", as: String.self),
            leaseUntil: try row.decode(column: "lease_until", as: Int.self), answer: answer)
    }
}
