import Foundation
import StepStore

/// Where a job is in its life. A finished job's row is deleted, so there is no "completed" state.
package enum JobState: String, Sendable, Hashable, CaseIterable {
    /// Waiting for `runAt` (new, or failed and waiting for its retry).
    case pending
    /// Claimed by a worker until `leaseUntil`; after that any worker may claim it again.
    case running
    /// Failed `maxAttempts` times; kept for operators (`stepd jobs list --state dead`, `stepd jobs retry`).
    case dead
}

/// What recording a failed attempt did to its job (`JobQueue.fail`).
package enum FailedAttempt: Sendable, Hashable {
    /// Pending again, after its backoff.
    case pending
    /// Dead: that was its last allowed attempt, or the failure was final.
    case dead
    /// Removed: a pending job with its dedupe key does the same work.
    case coalesced
    /// Nothing: the job is no longer this claim's (its lease ran out and another claim holds it, or it is gone).
    case leaseLost
}

/// A job to enqueue: a kind with a JSON payload, scoped to a walker (or to none, `walkerId` ""), run no
/// earlier than `runAt`. While a pending job with the same `dedupeKey` exists for the walker, enqueueing
/// another does nothing: a burst of work for one walker × day coalesces into one job.
package struct NewJob: Sendable, Hashable {
    package var kind: String
    package var walkerId: String
    package var payload: String
    package var dedupeKey: String?
    package var runAt: Date
    package var maxAttempts: Int
    /// When a pending job with the same dedupe key is waiting: false, this one coalesces into it as it is; true,
    /// it also brings the waiting job's run time forward to this one's when that is earlier (a refund part that
    /// falls due sooner than the part the waiting job was queued for, after `ledger.refundGraceSeconds` was
    /// lowered, say).
    package var earlierRunAtWins = false
}

/// A job's row, as operators and workers see it.
package struct JobRecord: Sendable, Hashable {
    package var id: String
    package var walkerId: String
    package var kind: String
    package var payload: String
    package var dedupeKey: String?
    package var state: JobState
    package var runAt: Date
    /// How many times a worker has claimed the job; the claim's fence (see `ClaimedJob`).
    package var attempts: Int
    package var maxAttempts: Int
    package var leaseUntil: Date?
    package var lastError: String?
    package var createdAt: Date
}

/// A job a worker holds. `attempt` fences it: completing or failing it applies only while the row still
/// has that attempt number, so a worker whose lease ran out (and whose job another worker claimed again)
/// changes nothing.
package struct ClaimedJob: Sendable, Hashable {
    package var id: String
    package var walkerId: String
    package var kind: String
    package var payload: String
    package var dedupeKey: String?
    package var attempt: Int
    package var maxAttempts: Int
    /// With jobs of several kinds claimed together, the ids of those that run in one transaction with this one, this
    /// one among them (`JobWorker.runTogether`); empty when it runs in a transaction of its own. A reconcile job does not wait for a day whose
    /// job is one of them: it has run by then (`Reconciler.deferral`).
    package var runsWith: Set<String> = []
}

/// What a heartbeat found (`JobQueue.extendLease`).
package enum LeaseExtension: Sendable, Hashable {
    /// The claim still holds the job; its lease runs `leaseSeconds` from now.
    case extended
    /// Another claim holds the job now (the lease ran out first), or it was parked: this attempt's outcome
    /// will change nothing.
    case lost
    /// The job's row is gone: it finished (possibly just now, by this very attempt).
    case gone
}

/// What `JobQueue.retry` did with a dead job.
package enum JobRetryOutcome: Sendable, Hashable {
    /// Pending again, to run now with a fresh count of attempts.
    case retried
    /// A pending job with the same dedupe key does the same work; the dead job was removed in its favour.
    case coalesced(into: String)
    case notFound
    case notDead(JobState)
}

extension JobRetryOutcome {
    /// The outcome as the audit and the admin API name a change (`retried`, `coalesced`); nil when nothing changed.
    package var auditOutcome: String? {
        switch self {
        case .retried: "retried"
        case .coalesced: "coalesced"
        case .notFound, .notDead: nil
        }
    }
}

/// What discarding a job did (`JobQueue.discard`).
package enum JobDiscardOutcome: Sendable, Hashable {
    /// The dead job was deleted.
    case discarded
    case notFound
    case notDead(JobState)
    /// A dead job that alone can still decide its walker's day: a reconcile of a day still PENDING, or the
    /// deadline of a re-read request still open. Discarded, the day would stay PENDING for good (no other path
    /// decides it, and past the offline cap no ingest queues another job): retry it instead. Likewise a refund
    /// whose allocation still waits for points: nothing queues it again, so the walker would never get them back.
    case stillNeeded(String)
}

/// Jittered exponential backoff: the n-th failure waits `min(cap, base × 2^(n−1))`, of which the second
/// half is random ("equal jitter"), so jobs that failed together do not retry together.
package struct JobBackoff: Sendable, Hashable {
    package var baseSeconds: Double
    package var capSeconds: Double

    package init(baseSeconds: Double = 5, capSeconds: Double = 3600) {
        self.baseSeconds = baseSeconds
        self.capSeconds = capSeconds
    }

    /// The bounds of the delay after failed attempt `attempt` (1-based).
    package func bounds(afterAttempt attempt: Int) -> ClosedRange<Double> {
        let exponent = Double(min(max(attempt, 1) - 1, 62))
        let full = min(capSeconds, baseSeconds * pow(2, exponent))
        return (full / 2)...full
    }

    package func delay(afterAttempt attempt: Int) -> Double {
        Double.random(in: bounds(afterAttempt: attempt))
    }

    /// The longest a job of `attempts` attempts can take from its first attempt to the end of its last: every wait
    /// at the top of its range, every attempt running for `attemptSeconds`.
    package func longestSpan(attempts: Int, attemptSeconds: Double) -> Double {
        (1..<max(attempts, 1)).reduce(Double(max(attempts, 0)) * attemptSeconds) {
            $0 + bounds(afterAttempt: $1).upperBound
        }
    }
}
