import Foundation
import Testing

@testable import StepSettings

/// The configuration table of docs/configuration.md documents exactly the keys the code declares, each with its
/// variable.
@Suite("docs/configuration.md table")
struct ReadmeTableTests {
    static let document = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/configuration.md")

    /// `(key, variable)` for each row of the table under `## Keys`.
    static func rows() throws -> [(key: String, variable: String)] {
        let text = try String(contentsOf: document, encoding: .utf8)
        let start = try #require(text.range(of: "\n## Keys\n"))
        let section = text[start.upperBound...]
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        return section[..<end].split(separator: "\n").compactMap { line in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count > 3, cells[1].hasPrefix("`"), cells[2].hasPrefix("`") else { return nil }
            return (cells[1].trimmingCharacters(in: ["`"]), cells[2].trimmingCharacters(in: ["`"]))
        }
    }

    @Test("the table lists every declared key and no other, each with its environment variable")
    func tableMatchesDeclarations() throws {
        let rows = try Self.rows()
        let documented = Set(rows.map(\.key))
        let declared = Set(ConfigurationCatalog.app.entries.map(\.name))
        #expect(documented.count == rows.count, "a key is listed twice")
        #expect(
            declared.subtracting(documented).isEmpty,
            "missing from docs/configuration.md: \(declared.subtracting(documented).sorted())")
        #expect(
            documented.subtracting(declared).isEmpty,
            "in docs/configuration.md but not declared: \(documented.subtracting(declared).sorted())")
        for row in rows {
            guard let entry = ConfigurationCatalog.app.entry(named: row.key) else { continue }
            #expect(row.variable == entry.environmentVariable, "\(row.key)")
        }
    }
}
