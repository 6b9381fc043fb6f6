package dev.concord;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The JSON this binding reads from the library and writes to it (RFC 8259, SPEC.md §10).
 *
 * <p>Values are plain Java objects: a {@code Map<String, Object>} for an object, a
 * {@code List<Object>} for an array, String, Boolean, null for JSON null, and for a number a Long
 * when it is an integer that fits in one (the library prints integers only) or a BigDecimal
 * otherwise.
 *
 * <p>The reader is strict, since what it reads is the library's canonical JSON and a surprise
 * there is worth hearing of: it refuses a duplicate key, a raw control character in a string, a
 * surrogate escape without its pair, and anything after the value. The writer writes canonical
 * JSON: keys sorted by their UTF-8 bytes, no white space, control characters as six-character
 * escapes (backslash, "u00", two lower-case hex digits).
 */
final class Json {
    private final String text;
    private int position;

    private Json(String text) {
        this.text = text;
    }

    /** The value of the JSON text {@code text}; IllegalArgumentException if it is not JSON. */
    static Object parse(String text) {
        Json reader = new Json(text);
        reader.skipWhiteSpace();
        Object value = reader.readValue();
        reader.skipWhiteSpace();
        if (reader.position != text.length()) throw reader.problem("more than one JSON value");
        return value;
    }

    /** The canonical JSON text of {@code value}, a value of the kinds {@link #parse} returns. */
    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        writeValue(value, out);
        return out.toString();
    }

    // MARK: Reading

    private Object readValue() {
        if (position >= text.length()) throw problem("the text ends where a value should be");
        char first = text.charAt(position);
        switch (first) {
            case '{':
                return readObject();
            case '[':
                return readArray();
            case '"':
                return readString();
            case 't':
                expectWord("true");
                return Boolean.TRUE;
            case 'f':
                expectWord("false");
                return Boolean.FALSE;
            case 'n':
                expectWord("null");
                return null;
            default:
                if (first == '-' || (first >= '0' && first <= '9')) return readNumber();
                throw problem("unexpected '" + first + "'");
        }
    }

    private Map<String, Object> readObject() {
        position++; // '{'
        Map<String, Object> object = new LinkedHashMap<>();
        skipWhiteSpace();
        if (peek() == '}') {
            position++;
            return object;
        }
        while (true) {
            skipWhiteSpace();
            if (peek() != '"') throw problem("expected a key");
            String key = readString();
            if (object.containsKey(key)) throw problem("the key '" + key + "' is given twice");
            skipWhiteSpace();
            expect(':');
            skipWhiteSpace();
            object.put(key, readValue());
            skipWhiteSpace();
            if (peek() == ',') {
                position++;
            } else {
                expect('}');
                return object;
            }
        }
    }

    private List<Object> readArray() {
        position++; // '['
        List<Object> array = new ArrayList<>();
        skipWhiteSpace();
        if (peek() == ']') {
            position++;
            return array;
        }
        while (true) {
            skipWhiteSpace();
            array.add(readValue());
            skipWhiteSpace();
            if (peek() == ',') {
                position++;
            } else {
                expect(']');
                return array;
            }
        }
    }

    private String readString() {
        position++; // '"'
        StringBuilder out = new StringBuilder();
        while (true) {
            if (position >= text.length()) throw problem("a string is not closed");
            char c = text.charAt(position++);
            if (c == '"') return out.toString();
            if (c < 0x20) throw problem("a raw control character in a string");
            if (c != '\\') {
                out.append(c);
                continue;
            }
            if (position >= text.length()) throw problem("a string is not closed");
            char escaped = text.charAt(position++);
            switch (escaped) {
                case '"': out.append('"'); break;
                case '\\': out.append('\\'); break;
                case '/': out.append('/'); break;
                case 'b': out.append('\b'); break;
                case 'f': out.append('\f'); break;
                case 'n': out.append('\n'); break;
                case 'r': out.append('\r'); break;
                case 't': out.append('\t'); break;
                case 'u': appendEscapedUnit(out); break;
                default: throw problem("an unknown escape '\\" + escaped + "'");
            }
        }
    }

    /**
     * Appends the character of a {@code \}{@code uXXXX} escape, whose "\\u" is read; a high
     * surrogate must be followed by the escape of its low one, and the two are appended as the
     * pair of UTF-16 units they are.
     */
    private void appendEscapedUnit(StringBuilder out) {
        char unit = readHexUnit();
        if (Character.isLowSurrogate(unit)) throw problem("a low surrogate without its high one");
        out.append(unit);
        if (!Character.isHighSurrogate(unit)) return;
        if (!text.startsWith("\\u", position)) throw problem("a high surrogate without its low one");
        position += 2;
        char low = readHexUnit();
        if (!Character.isLowSurrogate(low)) throw problem("a high surrogate without its low one");
        out.append(low);
    }

    private char readHexUnit() {
        if (position + 4 > text.length()) throw problem("a \\u escape with fewer than 4 digits");
        int value = 0;
        for (int i = 0; i < 4; i++) {
            int digit = Character.digit(text.charAt(position + i), 16);
            if (digit < 0) throw problem("a \\u escape with a character that is not a hex digit");
            value = value * 16 + digit;
        }
        position += 4;
        return (char) value;
    }

    private Object readNumber() {
        int start = position;
        if (peek() == '-') position++;
        if (peek() == '0') {
            position++;
        } else if (isDigit(peek())) {
            while (isDigit(peek())) position++;
        } else {
            throw problem("a number without digits");
        }
        boolean integer = true;
        if (peek() == '.') {
            integer = false;
            position++;
            if (!isDigit(peek())) throw problem("a number without digits after its point");
            while (isDigit(peek())) position++;
        }
        if (peek() == 'e' || peek() == 'E') {
            integer = false;
            position++;
            if (peek() == '+' || peek() == '-') position++;
            if (!isDigit(peek())) throw problem("a number without digits in its exponent");
            while (isDigit(peek())) position++;
        }
        String digits = text.substring(start, position);
        if (integer) {
            BigInteger value = new BigInteger(digits);
            if (value.bitLength() < 64) return value.longValue();
        }
        return new BigDecimal(digits);
    }

    private void expectWord(String word) {
        if (!text.startsWith(word, position)) throw problem("expected '" + word + "'");
        position += word.length();
    }

    private void expect(char c) {
        if (peek() != c) throw problem("expected '" + c + "'");
        position++;
    }

    /** The character at the position, or U+0000 at the end (which no JSON text holds raw). */
    private char peek() {
        return position < text.length() ? text.charAt(position) : '\0';
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    private void skipWhiteSpace() {
        while (position < text.length()) {
            char c = text.charAt(position);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
            position++;
        }
    }

    private IllegalArgumentException problem(String what) {
        return new IllegalArgumentException("not JSON: " + what + " at character " + position);
    }

    // MARK: Writing

    /** Orders keys by their UTF-8 bytes, which is the order of their code points. */
    private static final Comparator<String> UTF8_ORDER = (a, b) -> {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int x = a.codePointAt(i);
            int y = b.codePointAt(j);
            if (x != y) return Integer.compare(x, y);
            i += Character.charCount(x);
            j += Character.charCount(y);
        }
        return Boolean.compare(i < a.length(), j < b.length());
    };

    private static void writeValue(Object value, StringBuilder out) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String) {
            writeString((String) value, out);
        } else if (value instanceof Boolean || value instanceof Long || value instanceof Integer
                || value instanceof BigInteger || value instanceof BigDecimal) {
            out.append(value);
        } else if (value instanceof Map) {
            Map<String, Object> sorted = new TreeMap<>(UTF8_ORDER);
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                sorted.put((String) entry.getKey(), entry.getValue());
            }
            out.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> entry : sorted.entrySet()) {
                if (!first) out.append(',');
                first = false;
                writeString(entry.getKey(), out);
                out.append(':');
                writeValue(entry.getValue(), out);
            }
            out.append('}');
        } else if (value instanceof List) {
            out.append('[');
            boolean first = true;
            for (Object element : (List<?>) value) {
                if (!first) out.append(',');
                first = false;
                writeValue(element, out);
            }
            out.append(']');
        } else {
            throw new IllegalArgumentException("cannot write a " + value.getClass().getName() + " as JSON");
        }
    }

    /**
     * Writes a string as canonical JSON does. A surrogate without its pair is written as it is:
     * the JNI glue then refuses the text as not valid Unicode, naming what it was.
     */
    private static void writeString(String string, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < string.length(); i++) {
            char c = string.charAt(i);
            if (c == '"') {
                out.append("\\\"");
            } else if (c == '\\') {
                out.append("\\\\");
            } else if (c < 0x20) {
                out.append("\\u00").append(Character.forDigit(c >> 4, 16)).append(Character.forDigit(c & 0xF, 16));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }
}
