import Foundation
import StepStore

/// A kind of job: its name in the queue, its typed payload, and how a payload coalesces. The payload is stored
/// as JSON text (sorted keys) and decoded again when the job runs, so a payload that no longer decodes fails
/// the job with a message naming what is wrong, never a value.
package protocol JobDefinition: Sendable {
    associatedtype Payload: Codable & Sendable

    /// The `kind` column of the job's row. Never change a shipped kind: queued jobs name it.
    static var kind: String { get }

    /// While a pending job with this key exists for the walker, enqueueing another does nothing; nil never
    /// coalesces.
    static func dedupeKey(for payload: Payload) -> String?
}

/// A job whose work runs inside the transaction that also finishes it: its writes and its completion commit
/// together, so a job that runs twice (its worker died after the work, before the commit) has its effect once.
package protocol TransactionalJob: JobDefinition {
    /// Does the job's work in `tx` and returns what to do once `tx` has committed (counting its outcome): a
    /// transaction that rolls back runs the job again, which must not count it twice.
    func run(_ payload: Payload, job: ClaimedJob, in tx: StoreTransaction) async throws -> JobCommitted
}

/// What a transactional job does once the transaction that ran and finished it has committed.
package typealias JobCommitted = @Sendable () -> Void

/// A transactional job whose claimed jobs run together: the jobs of this kind a worker slot claimed at once,
/// in one call, inside the one transaction that also finishes them all (`JobWorker`). The effect must be what
/// `run` would have on each job in turn, in the order given (sorted by walker). It returns what to do once that
/// transaction has committed (counting outcomes): a batch that rolls back runs again job by job.
package protocol BatchTransactionalJob: TransactionalJob {
    func run(_ batch: [(payload: Payload, job: ClaimedJob)], in tx: StoreTransaction) async throws -> JobCommitted
}

/// A job whose work runs outside the transaction that finishes it (a network call, bounded batches in
/// transactions of their own); the work must be safe to repeat.
package protocol StandaloneJob: JobDefinition {
    func run(_ payload: Payload, job: ClaimedJob, on store: Store) async throws
}

extension JobDefinition {
    /// A job of this kind to enqueue (`JobQueue.enqueue`, `JobQueue.enqueueStatement`).
    package static func newJob(_ payload: Payload, walkerId: String, runAt: Date, maxAttempts: Int) -> NewJob {
        NewJob(
            kind: kind, walkerId: walkerId, payload: JobJSON.encode(payload),
            dedupeKey: dedupeKey(for: payload), runAt: runAt, maxAttempts: maxAttempts)
    }

    /// The payload of a claimed job of this kind.
    package static func payload(of job: ClaimedJob) throws -> Payload {
        try JobJSON.decodePayload(Payload.self, from: job.payload, kind: kind)
    }
}

/// How a kind of job runs, as the worker sees it.
package enum JobHandler: Sendable {
    /// Runs inside the transaction that also finishes the job (see `TransactionalJob`); what it returns runs once
    /// that transaction has committed.
    case transactional(@Sendable (ClaimedJob, StoreTransaction) async throws -> JobCommitted)
    /// Runs on the store in transactions of its own, then the job is finished (see `StandaloneJob`).
    case standalone(@Sendable (ClaimedJob, Store) async throws -> Void)

    package init<Job: TransactionalJob>(_ definition: Job) {
        self = .transactional { job, tx in
            try await definition.run(try Job.payload(of: job), job: job, in: tx)
        }
    }

    package init<Job: StandaloneJob>(_ definition: Job) {
        self = .standalone { job, store in
            try await definition.run(try Job.payload(of: job), job: job, on: store)
        }
    }

    /// A transactional handler with nothing to do after its commit.
    package static func inTransaction(_ body: @escaping @Sendable (ClaimedJob, StoreTransaction) async throws -> Void)
        -> JobHandler
    {
        .transactional { job, tx in
            try await body(job, tx)
            return {}
        }
    }
}

/// How a worker runs several claimed jobs of one kind together (see `BatchTransactionalJob`).
/// It returns what to do once the transaction has committed.
package typealias JobBatchHandler = @Sendable ([ClaimedJob], StoreTransaction) async throws -> JobCommitted

/// The handlers a worker runs, by job kind.
package struct JobRegistry: Sendable {
    private var handlers: [String: JobHandler]
    private var batchHandlers: [String: JobBatchHandler] = [:]

    /// Handlers by kind, as they are (tests register closures).
    package init(_ handlers: [String: JobHandler] = [:]) {
        self.handlers = handlers
    }

    package mutating func register<Job: TransactionalJob>(_ definition: Job) {
        handlers[Job.kind] = JobHandler(definition)
    }

    package mutating func register<Job: StandaloneJob>(_ definition: Job) {
        handlers[Job.kind] = JobHandler(definition)
    }

    package mutating func register<Job: BatchTransactionalJob>(_ definition: Job) {
        handlers[Job.kind] = JobHandler(definition)
        batchHandlers[Job.kind] = { jobs, tx in
            try await definition.run(try jobs.map { (try Job.payload(of: $0), $0) }, in: tx)
        }
    }

    package func handler(for kind: String) -> JobHandler? { handlers[kind] }

    /// The handler of a kind whose claimed jobs run together, if it has one.
    package func batchHandler(for kind: String) -> JobBatchHandler? { batchHandlers[kind] }

    /// The kinds with a handler.
    package var kinds: Set<String> { Set(handlers.keys) }

    /// The kinds a worker may be configured without: the webhook's, registered only with `events.webhookUrl`. A
    /// worker that lacks one leaves its jobs to the workers that have it (`JobQueue.claim`).
    package static let optionalKinds: Set<String> = [WebhookJob.kind]

    /// The kinds whose jobs wait on a service outside StepLedger (the webhook's receiver, up to
    /// `events.webhookTimeoutSeconds` a delivery). A worker of two slots or more keeps its first slot from them
    /// (`JobWorker.run`).
    package static let outboundKinds: Set<String> = [WebhookJob.kind]
}
