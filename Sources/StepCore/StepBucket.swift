import Foundation

/// The step sources seed 000 allows.
package enum StepSource: String, Sendable, Hashable, CaseIterable, Codable {
    case healthKit = "HealthKit"
    case healthConnect = "HealthConnect"
    case watchNative = "WatchNative"
}

/// A validated per-day step bucket, as a client submitted it.
package struct StepBucket: Sendable, Hashable {
    package var day: LocalDate
    package var count: Int
    package var source: StepSource
    package var timeZone: TimeZone
    package var spanStart: Date
    package var spanEnd: Date
    package var sourceBundleId: String
    package var gyroSamplesObserved: Bool

    package init(
        day: LocalDate, count: Int, source: StepSource, timeZone: TimeZone, spanStart: Date, spanEnd: Date,
        sourceBundleId: String, gyroSamplesObserved: Bool
    ) {
        self.day = day
        self.count = count
        self.source = source
        self.timeZone = timeZone
        self.spanStart = spanStart
        self.spanEnd = spanEnd
        self.sourceBundleId = sourceBundleId
        self.gyroSamplesObserved = gyroSamplesObserved
    }

    package var span: ClosedRange<Date> { spanStart...max(spanStart, spanEnd) }
}
