/// Why an ingest was rejected or quarantined. Raw values are the wire codes of seed 000.
package enum ReasonCode: String, Sendable, Hashable, CaseIterable, Codable {
    case countExceedsCap = "COUNT_EXCEEDS_CAP"
    case burstRateExceeded = "BURST_RATE_EXCEEDED"
    case tzJumpDetected = "TZ_JUMP_DETECTED"
    case dayInFuture = "DAY_IN_FUTURE"
    case offlineCapExceeded = "OFFLINE_CAP_EXCEEDED"
    case sourceNotWhitelisted = "SOURCE_NOT_WHITELISTED"
    case gyroAbsent = "GYRO_ABSENT"

    /// Quarantine-class reasons answer 200 with a warning instead of 422 (seed 000).
    package var isQuarantine: Bool { self == .gyroAbsent }
}

/// How the server runs (seed 000, "Test-phase mock mode").
package enum ServiceMode: String, Sendable, Hashable, CaseIterable {
    case testPhase = "test-phase"
    case production

    /// The reasons whose checks run in this mode.
    package var enabledReasons: Set<ReasonCode> {
        switch self {
        case .testPhase: [.countExceedsCap, .burstRateExceeded, .dayInFuture]
        case .production: Set(ReasonCode.allCases)
        }
    }
}
