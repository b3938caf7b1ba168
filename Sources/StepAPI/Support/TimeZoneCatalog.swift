import Foundation

/// IANA zone names only: Foundation also accepts abbreviations ("EST") and offsets ("GMT+2"), which are
/// not stable walker zones.
package enum TimeZoneCatalog {
    private static let known: Set<String> = Set(TimeZone.knownTimeZoneIdentifiers).union(["UTC", "Etc/UTC"])

    package static func zone(named name: String) -> TimeZone? {
        guard known.contains(name) else { return nil }
        return TimeZone(identifier: name)
    }
}
