/// Every key the configuration declares, by name, by section and by environment variable, with the nearest known
/// name for a misspelt one. Built from the sections' `ConfigurationKeys`, the same declarations the structs read.
package struct ConfigurationCatalog: Sendable {
    package struct Entry: Sendable, Hashable {
        /// The dotted name (`http.port`).
        package var name: String
        /// The section (`http`), or "" for a top-level key.
        package var section: String
        package var isSecret: Bool

        /// `STEPLEDGER_` and the key in upper snake case (`STEPLEDGER_HTTP_MAX_BODY_BYTES`).
        package var environmentVariable: String {
            ConfigurationCatalog.environmentPrefix + ConfigurationCatalog.upperSnakeCase(name)
        }
    }

    package static let environmentPrefix = "STEPLEDGER_"

    /// The configuration `stepd` reads.
    package static let app = ConfigurationCatalog(AppConfiguration.keySets)

    package let entries: [Entry]
    private let byName: [String: Entry]
    private let byVariable: [String: Entry]
    /// The section names ("http", "jwt" …).
    package let sections: Set<String>

    package init(_ keySets: [any ConfigurationKeys.Type]) {
        entries = keySets.flatMap { $0.declarations }
        byName = Dictionary(entries.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        byVariable = Dictionary(entries.map { ($0.environmentVariable, $0) }, uniquingKeysWith: { first, _ in first })
        sections = Set(entries.map(\.section).filter { !$0.isEmpty })
    }

    package func entry(named name: String) -> Entry? { byName[name] }

    package func entry(variable: String) -> Entry? { byVariable[variable] }

    /// The known key nearest to a misspelt one, when one is near enough to be worth suggesting.
    package func suggestion(forKey name: String) -> String? {
        Self.nearest(to: name, among: entries.map(\.name))
    }

    package func suggestion(forSection name: String) -> String? {
        Self.nearest(to: name, among: sections.sorted())
    }

    package func suggestion(forVariable name: String) -> String? {
        let prefix = Self.environmentPrefix
        let stripped = name.hasPrefix(prefix) ? String(name.dropFirst(prefix.count)) : name
        let candidates = entries.map { String($0.environmentVariable.dropFirst(prefix.count)) }
        return Self.nearest(to: stripped, among: candidates).map { prefix + $0 }
    }

    /// swift-configuration's environment spelling of a key: each camelCase word boundary becomes `_`, dots too.
    static func upperSnakeCase(_ name: String) -> String {
        var result = ""
        var previous: Character?
        for character in name {
            if character == "." {
                result.append("_")
            } else {
                if let previous, previous.isLowercase, character.isUppercase { result.append("_") }
                result.append(contentsOf: character.uppercased())
            }
            previous = character
        }
        return result
    }

    /// The candidate with the smallest edit distance (ignoring case), if it is within a third of the name's length
    /// (at least 2 edits): a transposed pair of letters or a missing one is found, an unrelated word is not.
    static func nearest(to name: String, among candidates: [String]) -> String? {
        let target = Array(name.lowercased())
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(target, Array(candidate.lowercased()))
            if distance < best?.distance ?? Int.max { best = (candidate, distance) }
        }
        guard let best, best.distance <= max(2, target.count / 3) else { return nil }
        return best.candidate
    }

    /// Levenshtein distance: insertions, deletions and substitutions.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
