/// A configuration source that cannot be used as it stands: a file that is missing or not well-formed JSON, a key,
/// section or environment variable the server does not know, a key given twice. The message names the source and,
/// for a file, the line and column.
package struct ConfigurationSourceError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Problem: Sendable, Equatable {
        case unreadable(reason: String)
        case malformed(reason: String)
        case duplicateKey(String)
        case unknownKey(String, suggestion: String?)
        case unknownSection(String, suggestion: String?)
        case unknownVariable(String, suggestion: String?)
        /// A section given a value, a key given an object, a list of something other than strings.
        case misplaced(String, reason: String)
    }

    /// The file's path as given, `environment` or `command line`.
    package var source: String
    package var position: TextPosition?
    package var problem: Problem

    package init(source: String, position: TextPosition? = nil, problem: Problem) {
        self.source = source
        self.position = position
        self.problem = problem
    }

    package var description: String {
        let place = position.map { "\(source):\($0.line):\($0.column)" } ?? source
        return "\(place): \(message)"
    }

    private var message: String {
        switch problem {
        case .unreadable(let reason): "cannot read the configuration file: \(reason)"
        case .malformed(let reason): "not valid JSON: \(reason)"
        case .duplicateKey(let key): "duplicate key '\(key)'"
        case .unknownKey(let key, let suggestion): "unknown key '\(key)'" + Self.hint(suggestion, quoted: true)
        case .unknownSection(let section, let suggestion):
            "unknown section '\(section)'" + Self.hint(suggestion, quoted: true)
        case .unknownVariable(let name, let suggestion):
            "unknown variable \(name), no configuration key maps to it" + Self.hint(suggestion, quoted: false)
        case .misplaced(let key, let reason): "'\(key)' \(reason)"
        }
    }

    private static func hint(_ suggestion: String?, quoted: Bool) -> String {
        guard let suggestion else { return "" }
        return quoted ? " (did you mean '\(suggestion)'?)" : " (did you mean \(suggestion)?)"
    }
}

/// A place in a text file, both counted from 1; the column counts characters, not bytes.
package struct TextPosition: Sendable, Hashable, CustomStringConvertible {
    package var line: Int
    package var column: Int

    package init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    package var description: String { "\(line):\(column)" }
}
