import Foundation

/// When a walker's day stops accepting new submissions (SPEC "StepLog per walker × day").
package enum DaySettlement {
    /// A day is final once `settleWindow` has passed since it ended in `timeZone` and nothing is left to reconcile.
    package static func isFinal(
        day: LocalDate, timeZone: TimeZone, now: Date, settleWindowSeconds: Double, hasUnreconciledSubmission: Bool
    ) -> Bool {
        guard !hasUnreconciledSubmission else { return false }
        let end = day.adding(days: 1).startInstant(in: timeZone)
        return now.timeIntervalSince(end) >= settleWindowSeconds
    }
}
