import Foundation
import Logging
import SQLKit
import StepDatabase
import StepStore
import StepTestSupport
import Testing

@Suite("SQLite backup (VACUUM INTO) of an open database")
struct BackupTests {
    @Test(
        "the copy holds every committed row and is its owner's alone; an existing file is refused unless replacing; no temporary is left"
    )
    func backup() async throws {
        let test = try await TestDatabases.make(.sqlite)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("backup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let written = try await test.store.transaction { tx in
            var seqs: [Int] = []
            for _ in 1...50 {
                seqs.append(try await tx.appendEvent(walkerId: "w", type: "t", data: "{}", at: Date()).seq)
            }
            return seqs
        }
        let file = directory.appendingPathComponent("copy.sqlite").path
        let report = try await SQLiteBackup.copy(databaseAt: test.url, to: file, replacing: false)
        #expect(report.bytes > 0)
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600, "the copy is its owner's alone: \(String(mode ?? 0, radix: 8))")
        await #expect(throws: SQLiteBackup.Failure.self) {
            try await SQLiteBackup.copy(databaseAt: test.url, to: file, replacing: false)
        }
        await #expect(throws: SQLiteBackup.Failure.self) {
            try await SQLiteBackup.copy(databaseAt: test.url + ".missing", to: file + "2", replacing: false)
        }
        _ = try await SQLiteBackup.copy(databaseAt: test.url, to: file, replacing: true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["copy.sqlite"])
        // A folder as the target (as `cp` takes one) is refused by name, --force or not, and nothing is written.
        for replacing in [false, true] {
            await #expect {
                try await SQLiteBackup.copy(databaseAt: test.url, to: directory.path, replacing: replacing)
            } throws: { error in
                (error as? SQLiteBackup.Failure)?.description
                    == "\(directory.path) is a directory: give the path of the file to write"
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["copy.sqlite"])
        try await test.close()

        let copy = try await StoreFactory.open(url: file, logger: Logger(label: "test"), migrate: false)
        let events = try await copy.transaction { try await $0.events(walkerId: "w", after: 0, limit: 100) }
        #expect(events.map(\.seq) == written && written.count == 50)
        try await copy.database.close()
    }
}
