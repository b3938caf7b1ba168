import Foundation

/// What the app knows of one day: the state to show beside the day's steps.
///
/// A day whose bucket is still in the queue is ``Status-swift.enum/queued``; once the server answered it is the
/// server's status. `PENDING` and `QUARANTINED` days are provisional: show their Energy as "being checked".
public struct DayState: Sendable, Hashable, Codable {
    public enum Status: String, Sendable, Hashable, Codable {
        /// Recorded on the phone and not yet answered by the server.
        case queued = "QUEUED"
        /// Taken by the server and waiting for reconciliation until ``DayState/reconcileEta``.
        case pending = "PENDING"
        /// Reconciled and credited.
        case accepted = "ACCEPTED"
        /// Held for a reviewer; the server decides it later.
        case quarantined = "QUARANTINED"
        /// Refused: the day earns nothing.
        case rejected = "REJECTED"
    }

    public var day: CalendarDay
    public var status: Status
    /// The highest count the server holds for the day, or the highest queued count while ``status`` is queued.
    public var reportedCount: Int
    /// The count the server accepted, once ``status`` is accepted.
    public var acceptedCount: Int?
    /// When the server reconciles a pending day.
    public var reconcileEta: Date?
    /// The Energy the last answer showed for the day's submission.
    public var provisionalEnergy: Int?
    /// What the ledger has credited for the day so far.
    public var energyCredited: Int?
    /// Why the day was quarantined or refused.
    public var reasons: [String]

    /// Whether the day's credit is still in flight (seed 001: treat `provisional: true` as in flight).
    public var isProvisional: Bool {
        switch status {
        case .queued, .pending, .quarantined: true
        case .accepted, .rejected: false
        }
    }

    public init(
        day: CalendarDay, status: Status, reportedCount: Int, acceptedCount: Int? = nil, reconcileEta: Date? = nil,
        provisionalEnergy: Int? = nil, energyCredited: Int? = nil, reasons: [String] = []
    ) {
        self.day = day
        self.status = status
        self.reportedCount = reportedCount
        self.acceptedCount = acceptedCount
        self.reconcileEta = reconcileEta
        self.provisionalEnergy = provisionalEnergy
        self.energyCredited = energyCredited
        self.reasons = reasons
    }
}
