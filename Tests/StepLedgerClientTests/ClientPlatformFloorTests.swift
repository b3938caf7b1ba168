import Foundation
import Testing

/// The client's floor is iOS 15 and macOS 12 (`Package.swift`), but its code is only ever compiled here on Linux,
/// where no API has an availability. This check reads the client's sources for APIs Apple ships only above the floor,
/// the ones that have slipped in before (`Synchronization.Mutex`) and their kin: not a compiler, a tripwire.
@Suite("Client platform floor")
struct ClientPlatformFloorTests {
    /// Each spelling with the first iOS / macOS that has it.
    static let aboveTheFloor: [(spelling: String, since: String)] = [
        ("import Synchronization", "iOS 18, macOS 15"), ("Mutex<", "iOS 18, macOS 15"), ("Mutex(", "iOS 18, macOS 15"),
        ("Atomic<", "iOS 18, macOS 15"), ("OSAllocatedUnfairLock", "iOS 16, macOS 13"),
        (".withLock", "iOS 16, macOS 13 (NSLocking)"), ("ContinuousClock", "iOS 16, macOS 13"),
        ("SuspendingClock", "iOS 16, macOS 13"), ("Duration", "iOS 16, macOS 13"),
        ("Task.sleep(for:", "iOS 16, macOS 13"), ("Task.sleep(until:", "iOS 16, macOS 13"),
        (".appending(path:", "iOS 16, macOS 13"), (".appending(component", "iOS 16, macOS 13"),
        ("URL(filePath:", "iOS 16, macOS 13"), (".path(percentEncoded:", "iOS 16, macOS 13"),
        ("Regex", "iOS 16, macOS 13"), (".firstMatch(of:", "iOS 16, macOS 13"), (".wholeMatch(of:", "iOS 16, macOS 13"),
        ("#/", "iOS 16, macOS 13"), ("@Observable", "iOS 17, macOS 14"), ("AsyncStream.makeStream", "iOS 17, macOS 14"),
    ]

    static var sources: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
    }

    /// The code of a Swift file, each line without its `//` comment (a doc comment may name what the code avoids).
    static func code(of file: URL) throws -> [(line: Int, text: String)] {
        try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            .enumerated().map { index, line in
                let text = line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line)
                return (index + 1, text)
            }
    }

    @Test(
        "the client's sources use no API above iOS 15 and macOS 12",
        arguments: ["StepLedgerClient", "stepledger-client"])
    func noAPIAboveTheFloor(target: String) throws {
        let folder = Self.sources.appendingPathComponent(target)
        let files = try #require(FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        #expect(!files.isEmpty, "the client's sources were not found at \(folder.path)")
        var found: [String] = []
        for file in files {
            for (line, text) in try Self.code(of: file) {
                for (spelling, since) in Self.aboveTheFloor where text.contains(spelling) {
                    found.append("\(file.lastPathComponent):\(line): \(spelling) (\(since))")
                }
            }
        }
        #expect(found.isEmpty, "\(found.joined(separator: "\n"))")
    }

    @Test("the tripwire sees a spelling in code, and not in a comment")
    func tripwireWorks() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("floor-\(UUID().uuidString).swift")
        defer { try? FileManager.default.removeItem(at: file) }
        try "// Mutex<String> would need iOS 18\nlet lock = Mutex<Int>(0)\n".write(
            to: file, atomically: true, encoding: .utf8)
        let lines = try Self.code(of: file)
        let hits = lines.filter { line in Self.aboveTheFloor.contains { line.text.contains($0.spelling) } }
        #expect(hits.map(\.line) == [2])
    }
}
