import SQLKit
import ServiceLifecycle
import StepDatabase
import Synchronization

/// The walkers a unit of work wrote: noted where it takes a walker's lock (`lockWalker`, the admission), which
/// every write of a walker's rows does first.
final class WrittenWalkers: Sendable {
    private let walkers = Mutex<[String]>([])

    func note(_ walkerId: String) {
        walkers.withLock { if !$0.contains(walkerId) { $0.append(walkerId) } }
    }

    var all: [String] { walkers.withLock { $0 } }
}

extension StoreTransaction {
    /// Notes that this unit writes `walkerId`'s rows (for read-your-writes on replicas).
    func noteWrite(of walkerId: String) {
        written?.note(walkerId)
    }
}

extension Store {
    /// A unit of work on the primary whose commit is recorded for the reads that follow: after it returns, the
    /// primary's WAL insert position is read on the same connection (one more statement, and only with
    /// replicas) and kept for each walker the unit locked (`ReadRouting`). A transaction is recorded even when it
    /// wrote no walker's rows (an operator's claim), for operators' lists; a unit outside a transaction only
    /// when it locked a walker (plain reads and the queue's claims record nothing).
    ///
    /// When the unit throws, or the position cannot be read, it may have committed at an unknown position: its
    /// walkers read from the primary until a position read later stands in for it (`ReadReplicas` reads one).
    func recordingCommits<T: Sendable>(
        to replicas: ReadReplicas, inTransaction: Bool,
        _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        let written = WrittenWalkers()
        let kind = self.kind
        do {
            return try await database.withConnection { sql in
                let tx = StoreTransaction(sql: sql, kind: kind, written: written)
                let value: T
                if inTransaction {
                    value = try await sql.runTransaction(begin: "BEGIN") { _ in try await body(tx) }
                } else {
                    value = try await body(tx)
                }
                let walkers = written.all
                guard inTransaction || !walkers.isEmpty else { return value }
                do {
                    replicas.committed(at: try await WALPosition.primaryInsertPosition(on: sql), walkers: walkers)
                } catch {
                    replicas.committedAtUnknownPosition(walkers: walkers)
                }
                return value
            }
        } catch {
            let walkers = written.all
            if inTransaction || !walkers.isEmpty { replicas.committedAtUnknownPosition(walkers: walkers) }
            throw error
        }
    }

    /// A read for an operator's list (`freshness` `.instance`) or of a walker's data: on a replica that has
    /// replayed what the read must see, else on the primary, outside a transaction. Without replicas, exactly
    /// `withoutTransaction`.
    package func read<T: Sendable>(
        _ freshness: ReadFreshness, _ body: @escaping @Sendable (StoreTransaction) async throws -> T
    ) async throws -> T {
        guard let replicas else { return try await withoutTransaction(body) }
        let onPrimary = { try await unit(inTransaction: false, recording: false, body) }
        guard case .replica(let index) = replicas.target(freshness) else {
            return try await replicas.onPrimary(onPrimary)
        }
        return try await replicas.read(on: index, body, fallback: onPrimary)
    }

    /// The replicas' pools and polls besides the primary's pool, for a service group.
    package var lifecycleServices: [any Service] {
        database.lifecycleServices + (replicas?.lifecycleServices ?? [])
    }

    /// Closes the replicas, then the primary.
    package func close() async throws {
        var failure: (any Error)?
        do {
            try await replicas?.close()
        } catch {
            failure = error
        }
        try await database.close()
        if let failure { throw failure }
    }
}
