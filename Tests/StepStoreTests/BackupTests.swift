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

    @Test(
        "without replacing, a file that appears at the destination while the copy is written is refused and kept; with replacing it is replaced"
    )
    func publishRefusesLateFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("publish-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let copy = directory.appendingPathComponent(".backup.sqlite.partial-1-ABCDEF12").path
        let destination = directory.appendingPathComponent("backup.sqlite").path
        try Data("the copy".utf8).write(to: URL(fileURLWithPath: copy))
        try Data("yesterday's backup".utf8).write(to: URL(fileURLWithPath: destination))
        #expect {
            try SQLiteBackup.publish(copy, as: destination, replacing: false)
        } throws: { error in
            (error as? SQLiteBackup.Failure)?.description == "\(destination) exists; pass --force to replace it"
        }
        #expect(try String(contentsOfFile: destination, encoding: .utf8) == "yesterday's backup")
        try SQLiteBackup.publish(copy, as: destination, replacing: true)
        #expect(try String(contentsOfFile: destination, encoding: .utf8) == "the copy")
        #expect(!FileManager.default.fileExists(atPath: copy))
        // Without replacing, to a free name: the copy is there, and its temporary name is gone.
        try Data("another copy".utf8).write(to: URL(fileURLWithPath: copy))
        let fresh = directory.appendingPathComponent("fresh.sqlite").path
        try SQLiteBackup.publish(copy, as: fresh, replacing: false)
        #expect(try String(contentsOfFile: fresh, encoding: .utf8) == "another copy")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == [
                "backup.sqlite", "fresh.sqlite",
            ])
    }

    @Test(
        "a killed backup's partial copy and its journal are removed by the next backup into the folder, whatever file that one writes"
    )
    func abandonedOfAnyName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("abandoned-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let names = [
            ".stepledger-2026-05-18.sqlite.partial-999999-FDB7B6C2",
            ".stepledger-2026-05-18.sqlite.partial-999999-FDB7B6C2-journal",
            // Not a partial copy: other dot files, a name without the pid, a suffix of another length.
            ".profile", ".x.partial-abc-FDB7B6C2", ".x.partial-999999-FDB7", "x.partial-999999-FDB7B6C2",
        ]
        for name in names {
            let path = directory.appendingPathComponent(name).path
            try Data("x".utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes(
                [.modificationDate: Date().addingTimeInterval(-3600)], ofItemAtPath: path)
        }
        #expect(SQLiteBackup.partialCopy(names[0])?.pid == 999_999)
        #expect(SQLiteBackup.partialCopy(names[2]) == nil)
        SQLiteBackup.removeAbandoned(in: directory.path)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == names[2...].sorted())
    }
}
