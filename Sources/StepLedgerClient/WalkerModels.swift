import Foundation

/// The walker as the server's ledger has it (`GET /walker`).
public struct WalkerState: Sendable, Hashable {
    public struct Streak: Sendable, Hashable {
        public var currentLengthDays: Int
        public var lastAttestedDate: CalendarDay?
        /// `T0_NONE`, `T1_7D` or `T2_30D`.
        public var bonusTier: String
        public var decayAt: CalendarDay?
    }

    public struct Energy: Sendable, Hashable {
        /// The sum of the walker's ledger.
        public var confirmed: Int
        /// Energy shown for days still being checked.
        public var pending: Int
        /// What an allocation may still take.
        public var spendable: Int
    }

    /// A day the server asks the app to read again (the challenge re-read handshake); answer it with
    /// ``StepLedgerClient/answerReread(_:readings:sampleDigest:attempts:idempotencyKey:)``.
    public struct RereadRequest: Sendable, Hashable, Codable {
        public var id: String
        public var day: CalendarDay
        public var windowStart: Date
        public var windowEnd: Date
        public var nonce: String
        public var deadline: Date
    }

    public var walkerId: String
    public var totalLifetimeSteps: Int
    public var currentRegionId: String
    public var streak: Streak
    public var energy: Energy
    public var rereadRequests: [RereadRequest]
}

/// Energy spent on a tree or keystone node.
public struct Allocation: Sendable, Hashable, Codable, Identifiable {
    public enum Kind: String, Sendable, Hashable, Codable {
        case tree, keystone
    }

    public enum Status: String, Sendable, Hashable, Codable {
        /// Paid partly from credit still being checked: show a "pending validation" badge (seed 001).
        case provisional
        case confirmed
        /// Every point came back because the days it drew on were not credited.
        case refunded
    }

    public var id: String
    public var kind: Kind
    public var nodeId: String
    public var points: Int
    public var refundedPoints: Int
    public var status: Status
    /// The undecided days whose pending credit paid for part of it.
    public var dependsOn: [CalendarDay]
    public var createdAt: Date

    /// Whether the app should badge it as "pending validation".
    public var isPendingValidation: Bool { status == .provisional }

    /// The allocation after an `allocation-reverted` event for `days`: nil when no day it depends on is left
    /// undecided (it is settled), else still provisional without those days. A refund can be partial (one day of
    /// several was rejected), and the server keeps such an allocation provisional while its other days wait.
    /// Idempotent, as an event may come twice (delivery is at least once).
    func reverted(days: [CalendarDay]) -> Allocation? {
        var after = self
        after.dependsOn.removeAll { days.contains($0) }
        return after.dependsOn.isEmpty ? nil : after
    }
}

/// An event of the walker's log, in the order the server stored them.
public struct WalkerEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// Points of an allocation came back because the days it drew on were not credited: clear its badge.
        case allocationReverted(allocationId: String, points: Int, days: [CalendarDay])
        /// The server asks for a fresh read of a day: answer with
        /// ``StepLedgerClient/answerReread(_:readings:sampleDigest:attempts:idempotencyKey:)`` before the deadline.
        case rereadRequested(WalkerState.RereadRequest)
        /// A type this version of the client does not know.
        case other(type: String)
    }

    /// The event's place in the walker's log; the client resumes after the last one it delivered.
    public var id: Int64
    public var kind: Kind
    public var createdAt: Date
}
