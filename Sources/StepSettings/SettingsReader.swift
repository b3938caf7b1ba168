import Configuration
import Foundation

/// Reads one section's keys from a reader scoped to that section, and turns a value of the wrong shape into an
/// error naming its key instead of the silent fallback to the default that plain reads give. Keys are the section's
/// `ConfigurationKeys` cases, so a read cannot name an undeclared key, and secrets are read as secrets.
package struct SettingsReader<Key: ConfigurationKeys> {
    private let config: ConfigReader

    /// `config` is already scoped to `Key.section` (`reader.scoped(to: "http")`).
    package init(_ config: ConfigReader) {
        self.config = config
    }

    /// A value as its provider holds it: a file gives numbers and booleans, the environment and the command line
    /// give text, a file may give a list of strings.
    private enum Raw {
        case text(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        case list([String])
    }

    /// The value of the highest-precedence source that has the key: a source holding it as another type stops the
    /// lookup there, so each typed read below finds the same source's value or nothing.
    private func raw(_ key: Key) -> Raw? {
        let configKey = ConfigKey([key.rawValue])
        let secret = key.isSecret
        if let value = config.string(forKey: configKey, isSecret: secret) { return .text(value) }
        if let value = config.int(forKey: configKey, isSecret: secret) { return .int(value) }
        if let value = config.double(forKey: configKey, isSecret: secret) { return .double(value) }
        if let value = config.bool(forKey: configKey, isSecret: secret) { return .bool(value) }
        if let value = config.stringArray(forKey: configKey, isSecret: secret) { return .list(value) }
        return nil
    }

    package func error(_ key: Key, _ problem: String) -> ConfigurationError {
        ConfigurationError(key: key.name, problem: problem)
    }

    /// `, not 'value'` for a message, or nothing for a secret.
    private func shown(_ key: Key, _ value: String) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        // A line break or another control character inside it is named, not repeated: the error is one line.
        if trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return key.isSecret ? "" : " (it holds a line break, a tab or another control character)"
        }
        return key.isSecret ? "" : ", not '\(trimmed)'"
    }

    /// Trimmed text, line breaks included (a secret written with `echo` into a file that an orchestrator turns
    /// into an environment variable ends in one, which no header or signature could then match); empty text is
    /// an error rather than "unset", and so is text that still holds a control character.
    package func string(_ key: Key) throws -> String? {
        guard let text = try text(key, trimming: .whitespacesAndNewlines) else { return nil }
        try refuseControlCharacters(text, key)
        return text
    }

    /// The shortest secret a key accepts, in UTF-8 bytes: a bearer token, an HMAC or signing key.
    package static var minimumSecretBytes: Int { 32 }

    /// A secret (`string`), refused when shorter than `minimumSecretBytes`.
    package func secret(_ key: Key) throws -> String? {
        guard let text = try string(key) else { return nil }
        return try longEnough(text, key)
    }

    /// An HMAC key (`events.webhookSecret`, `jwt.devSecret`), refused when shorter than `minimumSecretBytes`: taken
    /// as written but for spaces and tabs around it, line breaks kept, since whoever checks the signatures keys with
    /// the same bytes (a key wrapped over lines as `openssl rand -base64 64` prints it, or one ending in the newline
    /// of the file it was read from, as before).
    package func signingKey(_ key: Key) throws -> [UInt8]? {
        guard let text = try text(key, trimming: .whitespaces) else { return nil }
        return Array(try longEnough(text, key).utf8)
    }

    /// The key's text trimmed of `characters`; empty text is an error rather than "unset".
    private func text(_ key: Key, trimming characters: CharacterSet) throws -> String? {
        switch raw(key) {
        case nil: return nil
        case .text(let text):
            let trimmed = text.trimmingCharacters(in: characters)
            guard !trimmed.isEmpty else { throw error(key, "must not be empty") }
            return trimmed
        case .list: throw error(key, "must be a single value, not a list")
        case .int, .double, .bool: throw error(key, "must be a string")
        }
    }

    private func longEnough(_ secret: String, _ key: Key) throws -> String {
        guard secret.utf8.count >= Self.minimumSecretBytes else {
            throw error(key, "must be at least \(Self.minimumSecretBytes) bytes")
        }
        return secret
    }

    package func bool(_ key: Key) throws -> Bool? {
        switch raw(key) {
        case nil: return nil
        case .bool(let value): return value
        case .text(let text):
            guard let value = Bool(text.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()) else {
                throw error(key, "must be true or false" + shown(key, text))
            }
            return value
        case .int, .double, .list: throw error(key, "must be true or false")
        }
    }

    package func int(_ key: Key, in range: ClosedRange<Int>) throws -> Int? {
        let value: Int
        switch raw(key) {
        case nil: return nil
        case .int(let number): value = number
        case .text(let text):
            guard let number = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw error(key, "must be an integer" + shown(key, text))
            }
            value = number
        case .double(let number): throw error(key, "must be an integer" + shown(key, "\(number)"))
        case .bool, .list: throw error(key, "must be an integer")
        }
        guard range.contains(value) else {
            throw error(key, "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return value
    }

    package func double(_ key: Key, in range: ClosedRange<Double>) throws -> Double? {
        let value: Double
        switch raw(key) {
        case nil: return nil
        case .double(let number): value = number
        case .int(let number): value = Double(number)
        case .text(let text):
            guard let number = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)), number.isFinite else {
                throw error(key, "must be a number" + shown(key, text))
            }
            value = number
        case .bool, .list: throw error(key, "must be a number")
        }
        guard range.contains(value) else {
            throw error(key, "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return value
    }

    /// A list: comma-separated text (the environment, the command line) or a JSON list of strings (a file).
    /// Entries are trimmed and empty ones dropped; a list with none left is an error naming what it should hold.
    package func list(_ key: Key, of entries: String) throws -> [String]? {
        let items: [String]
        switch raw(key) {
        case nil: return nil
        case .text(let text): items = text.split(separator: ",").map(String.init)
        case .list(let list): items = list
        case .int, .double, .bool: throw error(key, "must be a comma-separated list of \(entries)s")
        }
        let trimmed = items.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
        guard !trimmed.isEmpty else { throw error(key, "must name at least one \(entries)") }
        for entry in trimmed { try refuseControlCharacters(entry, key) }
        return trimmed
    }

    /// A value no client or receiver could ever match: a line break, a tab or another control character inside it
    /// (the value is not repeated: it may be a secret).
    private func refuseControlCharacters(_ text: String, _ key: Key) throws {
        guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw error(key, "must not contain a line break, a tab or another control character")
        }
    }
}
