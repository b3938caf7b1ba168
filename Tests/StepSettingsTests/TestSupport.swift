import Configuration
import Foundation
import Synchronization

@testable import StepSettings

/// A configuration file in a fresh temporary directory, removed by `remove()`.
struct TemporaryConfigFile {
    let directory: URL
    let path: String

    init(_ contents: String, name: String = "config.json") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("stepsettings-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent(name).path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Loads a file's text through the strict loader, as `stepd --config` does, and returns what it throws.
func loadingError(file contents: String, environment: [String: String] = [:]) throws -> (any Error)? {
    let file = try TemporaryConfigFile(contents)
    defer { file.remove() }
    do {
        _ = try ConfigurationSources(environment: environment, file: file.path).load()
        return nil
    } catch {
        return error
    }
}

/// Records every configuration read.
final class AccessRecorder: AccessReporter {
    private let events = Mutex<[AccessEvent]>([])

    func report(_ event: AccessEvent) {
        events.withLock { $0.append(event) }
    }

    var recorded: [AccessEvent] { events.withLock { $0 } }
}

/// A reader over string values, as the environment or the command line gives them.
func reader(_ values: [String: String]) -> ConfigReader {
    ConfigReader(
        provider: InMemoryProvider(
            values: Dictionary(
                uniqueKeysWithValues: values.map {
                    (AbsoluteConfigKey(ConfigKey($0.key)), ConfigValue(.string($0.value), isSecret: false))
                })))
}
