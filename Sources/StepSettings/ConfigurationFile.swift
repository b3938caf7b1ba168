import Configuration
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A JSON configuration file read strictly: well-formed JSON, every section and key known to the catalog, no key
/// twice. Its values keep the position they were written at, so a later validation error can point at them.
struct ConfigurationFile {
    struct Setting {
        /// Nil for a JSON `null`: written, so checked, but unset.
        var content: ConfigContent?
        var position: TextPosition
    }

    /// The path as given on the command line, for messages.
    let source: String
    private(set) var settings: [String: Setting] = [:]
    private let catalog: ConfigurationCatalog

    init(path: String, catalog: ConfigurationCatalog) throws {
        // `stat` tells a missing file from one the process may not reach (a directory it cannot search: the
        // configuration directory's group not the service's), which `FileManager.fileExists` reports as missing.
        var info = stat()
        guard stat(path, &info) == 0 else {
            let reason =
                switch errno {
                case ENOENT, ENOTDIR: "no such file"
                case EACCES: "permission denied (on the file or a directory above it)"
                default: String(cString: strerror(errno)).lowercased()
                }
            throw ConfigurationSourceError(source: path, problem: .unreadable(reason: reason))
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            throw ConfigurationSourceError(source: path, problem: .unreadable(reason: "a directory"))
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationSourceError(source: path, problem: .unreadable(reason: "permission denied"))
        }
        try self.init(source: path, contents: Array(data), catalog: catalog)
    }

    init(source: String, contents: [UInt8], catalog: ConfigurationCatalog) throws {
        self.source = source
        self.catalog = catalog
        let members: [StrictJSONParser.Member]
        do {
            members = try StrictJSONParser.parseObject(contents)
        } catch {
            throw ConfigurationSourceError(
                source: source, position: error.position, problem: .malformed(reason: error.reason))
        }
        try read(members, path: [])
    }

    private func failure(_ problem: ConfigurationSourceError.Problem, at position: TextPosition)
        -> ConfigurationSourceError
    {
        ConfigurationSourceError(source: source, position: position, problem: problem)
    }

    /// A member's key may itself be dotted (`{"http.port": 1}` is `http.port`, as swift-configuration reads it).
    private mutating func read(_ members: [StrictJSONParser.Member], path: [String]) throws {
        var seen: Set<String> = []
        for member in members {
            let components = path + member.key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            let name = components.joined(separator: ".")
            guard seen.insert(member.key).inserted else { throw failure(.duplicateKey(name), at: member.keyPosition) }
            let isKey = catalog.entry(named: name) != nil
            let isSection = components.count == 1 && catalog.sections.contains(name)
            switch member.node.value {
            case .object(let inner):
                if isKey {
                    throw failure(
                        .misplaced(name, reason: "is a key: it takes a value, not an object"), at: member.keyPosition)
                }
                guard isSection else { throw unknown(components, isObject: true, at: member.keyPosition) }
                try read(inner, path: components)
            default:
                if isSection {
                    throw failure(
                        .misplaced(name, reason: "is a section: it takes an object of keys"), at: member.keyPosition)
                }
                guard isKey, !components.contains(where: \.isEmpty) else {
                    throw unknown(components, isObject: false, at: member.keyPosition)
                }
                guard settings[name] == nil else { throw failure(.duplicateKey(name), at: member.keyPosition) }
                settings[name] = Setting(
                    content: try content(of: member.node, name: name), position: member.node.position)
            }
        }
    }

    /// An unknown top-level object, or an unknown first part of a dotted key, is an unknown section; anything else
    /// is an unknown key.
    private func unknown(_ components: [String], isObject: Bool, at position: TextPosition) -> ConfigurationSourceError
    {
        let first = components[0]
        let name = components.joined(separator: ".")
        if !catalog.sections.contains(first), isObject || components.count > 1 {
            return failure(.unknownSection(first, suggestion: catalog.suggestion(forSection: first)), at: position)
        }
        return failure(.unknownKey(name, suggestion: catalog.suggestion(forKey: name)), at: position)
    }

    private func content(of node: StrictJSONParser.Node, name: String) throws -> ConfigContent? {
        switch node.value {
        case .string(let text): return .string(text)
        case .int(let number): return .int(number)
        case .double(let number): return .double(number)
        case .bool(let flag): return .bool(flag)
        case .null: return nil
        case .array(let elements):
            var strings: [String] = []
            for element in elements {
                guard case .string(let text) = element.value else {
                    throw failure(
                        .misplaced(name, reason: "takes a value or a list of strings, not a list of other things"),
                        at: element.position)
                }
                strings.append(text)
            }
            return .stringArray(strings)
        case .object: return nil
        }
    }
}
