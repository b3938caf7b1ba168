/// Where the operating system's step count came from (seed 000's `source`).
public enum StepSource: String, Codable, Hashable, Sendable, CaseIterable {
    case healthKit = "HealthKit"
    case healthConnect = "HealthConnect"
    case watchNative = "WatchNative"
}
