import Foundation

/// IANA zone names only: Foundation also accepts abbreviations ("EST") and offsets ("GMT+2"), which are
/// not stable walker zones.
package enum TimeZoneCatalog {
    private static let known: Set<String> = Set(TimeZone.knownTimeZoneIdentifiers).union(["UTC", "Etc/UTC"])
    /// The IANA regions. Foundation's list leaves out some canonical names its tz database still has
    /// (`Asia/Kolkata`, listed only as `Asia/Calcutta`), so an `Area/Location` name it resolves as itself counts too.
    private static let areas: Set<Substring> = [
        "Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific",
    ]

    /// The tz database's other names of UTC (its `backward` and `etcetera` files), which some devices report:
    /// `Etc/GMT` on Android, `Universal` or `Zulu` from older tz data. Offsets other than zero (`Etc/GMT+2`, whose
    /// sign is the reverse of what it reads) and abbreviations stay refused.
    private static let utcNames: Set<String> = [
        "Etc/GMT", "Etc/Greenwich", "Etc/UCT", "Etc/Universal", "Etc/Zulu", "Greenwich", "UCT", "Universal", "Zulu",
    ]

    package static func zone(named name: String) -> TimeZone? {
        if known.contains(name) { return TimeZone(identifier: name) }
        if utcNames.contains(name) { return TimeZone(identifier: name) ?? TimeZone(identifier: "UTC") }
        guard name.utf8.count <= 64, let area = name.split(separator: "/").first, areas.contains(area),
            name.contains("/"), let zone = TimeZone(identifier: name), zone.identifier == name
        else { return nil }
        return zone
    }
}
