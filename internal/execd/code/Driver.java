// execd's Java driver: evaluates cells with the JShell API (jdk.jshell), in
// one JShell instance whose snippets (variables, methods, classes, imports)
// persist from cell to cell. Run in source-file mode: java Driver.java.
//
// Requests arrive as JSON lines on stdin: {"id": "...", "code": "..."} runs
// a cell; {"stop": true, "id": "..."} stops that cell (JShell.stop()),
// whether it runs already or is still to start: a stop that comes before
// the cell is evaluated is kept, and JShell.stop() is repeated until the
// cell has ended, since a stop that reaches JShell before the cell's code
// runs in the engine has no effect.
// Events leave as JSON lines on file descriptor 3 (/proc/self/fd/3), as for
// the JavaScript driver: {"id", "type": "stdout"|"stderr"|"result"|"error"|
// "done", "text"?, "ename"?, "evalue"?, "traceback"?}. Every cell ends with
// exactly one "done"; an "error" before it means the cell failed. When the
// execution engine dies (System.exit in a cell), the driver exits.

import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
import java.util.concurrent.*;
import jdk.jshell.*;

public class Driver {
    static PrintStream events;
    static volatile String current; // id of the cell being evaluated
    static volatile boolean stopped; // the current cell is to stop
    static final Object lock = new Object(); // guards current, stopped, stopId together
    static String stopId; // the last cell a stop was asked for

    static synchronized void emit(Map<String, Object> ev) {
        StringBuilder b = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, Object> e : ev.entrySet()) {
            if (!first) b.append(',');
            first = false;
            quote(b, e.getKey());
            b.append(':');
            Object v = e.getValue();
            if (v instanceof List) {
                b.append('[');
                boolean f2 = true;
                for (Object o : (List<?>) v) {
                    if (!f2) b.append(',');
                    f2 = false;
                    quote(b, String.valueOf(o));
                }
                b.append(']');
            } else {
                quote(b, String.valueOf(v));
            }
        }
        b.append("}\n");
        events.print(b);
        events.flush();
    }

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        b.append('"');
    }

    static Map<String, Object> ev(String type) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (current != null) m.put("id", current);
        m.put("type", type);
        return m;
    }

    // Cell output: the execution engine's System.out/err, forwarded as
    // events of the cell in progress.
    static OutputStream output(String type) {
        return new OutputStream() {
            final ByteArrayOutputStream buf = new ByteArrayOutputStream();
            @Override public synchronized void write(int c) { buf.write(c); if (c == '\n') flush(); }
            @Override public synchronized void write(byte[] b, int off, int len) { buf.write(b, off, len); flush(); }
            @Override public synchronized void flush() {
                if (buf.size() == 0) return;
                String s = buf.toString(StandardCharsets.UTF_8);
                buf.reset();
                if (current != null) {
                    Map<String, Object> m = ev(type);
                    m.put("text", s);
                    emit(m);
                }
            }
        };
    }

    // A minimal parser for the flat JSON objects of the request protocol.
    static Map<String, Object> parse(String s) {
        Map<String, Object> m = new HashMap<>();
        int[] i = {0};
        skip(s, i);
        if (i[0] >= s.length() || s.charAt(i[0]) != '{') return m;
        i[0]++;
        while (true) {
            skip(s, i);
            if (i[0] >= s.length() || s.charAt(i[0]) == '}') return m;
            if (s.charAt(i[0]) == ',') { i[0]++; continue; }
            String k = str(s, i);
            skip(s, i);
            i[0]++; // ':'
            skip(s, i);
            char c = s.charAt(i[0]);
            if (c == '"') m.put(k, str(s, i));
            else {
                int j = i[0];
                while (j < s.length() && ",} \t".indexOf(s.charAt(j)) < 0) j++;
                m.put(k, s.substring(i[0], j));
                i[0] = j;
            }
        }
    }

    static void skip(String s, int[] i) {
        while (i[0] < s.length() && Character.isWhitespace(s.charAt(i[0]))) i[0]++;
    }

    static String str(String s, int[] i) {
        StringBuilder b = new StringBuilder();
        i[0]++; // opening quote
        while (i[0] < s.length()) {
            char c = s.charAt(i[0]++);
            if (c == '"') break;
            if (c != '\\') { b.append(c); continue; }
            char e = s.charAt(i[0]++);
            switch (e) {
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'u': b.append((char) Integer.parseInt(s.substring(i[0], i[0] + 4), 16)); i[0] += 4; break;
                default: b.append(e);
            }
        }
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        events = new PrintStream(new FileOutputStream("/proc/self/fd/3"), false, StandardCharsets.UTF_8);
        PrintStream out = new PrintStream(output("stdout"), true, StandardCharsets.UTF_8);
        PrintStream err = new PrintStream(output("stderr"), true, StandardCharsets.UTF_8);
        JShell.Builder jb = JShell.builder().out(out).err(err).in(new ByteArrayInputStream(new byte[0]));
        if (args.length > 0 && !args[0].isEmpty()) jb.remoteVMOptions(args[0].split(" "));
        JShell js = jb.build();
        js.onShutdown(j -> {
            // The execution engine died (System.exit in a cell, a crash):
            // the context's state is gone; execd restarts the driver.
            System.exit(3);
        });
        SourceCodeAnalysis sca = js.sourceCodeAnalysis();
        // Warm up the execution engine, so the first cell is not slow.
        js.eval("0;");

        BlockingQueue<Map<String, Object>> cells = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    Map<String, Object> req = parse(line);
                    if ("true".equals(req.get("stop"))) {
                        String id = String.valueOf(req.get("id"));
                        synchronized (lock) {
                            stopId = id;
                            if (id.equals(current)) stopped = true;
                        }
                        Thread stopper = new Thread(() -> {
                            while (true) {
                                synchronized (lock) {
                                    boolean pending = id.equals(stopId) && current == null; // still to come
                                    boolean running = id.equals(current);
                                    if (!pending && !running) return;
                                    if (running) {
                                        try {
                                            js.stop();
                                        } catch (Throwable t) {
                                            return; // the engine is gone
                                        }
                                    }
                                }
                                try {
                                    Thread.sleep(50);
                                } catch (InterruptedException e) {
                                    return;
                                }
                            }
                        });
                        stopper.setDaemon(true);
                        stopper.start();
                        continue;
                    }
                    cells.add(req);
                }
            } catch (IOException e) {
                // fall through
            }
            cells.add(Map.of("exit", "true")); // after the cells already queued
        });
        reader.setDaemon(true);
        reader.start();
        emit(ev("ready"));
        while (true) {
            Map<String, Object> req = cells.take();
            if (req.containsKey("exit")) System.exit(0);
            String id = String.valueOf(req.get("id"));
            synchronized (lock) {
                current = id;
                stopped = id.equals(stopId);
            }
            try {
                if (stopped) interrupted();
                else cell(js, sca, String.valueOf(req.getOrDefault("code", "")));
            } catch (IllegalStateException e) {
                // JShell closed under us: the engine is gone.
                System.exit(3);
            } catch (Throwable t) {
                error("InternalError", String.valueOf(t), List.of(String.valueOf(t)));
            }
            out.flush();
            err.flush();
            emit(ev("done"));
            synchronized (lock) {
                current = null;
                stopped = false;
                if (id.equals(stopId)) stopId = null;
            }
        }
    }

    static void error(String ename, String evalue, List<String> tb) {
        Map<String, Object> m = ev("error");
        m.put("ename", ename);
        m.put("evalue", evalue);
        m.put("traceback", tb);
        emit(m);
    }

    // cell evaluates code snippet by snippet; it stops at the first error.
    // The value of the last snippet, when it is an expression, is the result.
    static void cell(JShell js, SourceCodeAnalysis sca, String code) {
        String remaining = code;
        while (!remaining.isBlank()) {
            SourceCodeAnalysis.CompletionInfo ci = sca.analyzeCompletion(remaining);
            String src;
            switch (ci.completeness()) {
                case EMPTY:
                    return;
                case DEFINITELY_INCOMPLETE:
                case CONSIDERED_INCOMPLETE:
                    if (ci.completeness() == SourceCodeAnalysis.Completeness.CONSIDERED_INCOMPLETE) {
                        // e.g. an expression without its ';' at the end of the cell
                        src = remaining;
                        remaining = "";
                        break;
                    }
                    error("CompilationError", "incomplete input", List.of("incomplete input: " + remaining.strip()));
                    return;
                default:
                    src = ci.source();
                    remaining = ci.remaining();
            }
            if (src == null || src.isBlank()) return;
            boolean last = remaining.isBlank();
            if (stopped) {
                interrupted();
                return;
            }
            List<SnippetEvent> evs = js.eval(src);
            if (stopped) {
                interrupted();
                return;
            }
            for (SnippetEvent e : evs) {
                if (e.causeSnippet() != null) continue; // an update of a dependent snippet
                Snippet sn = e.snippet();
                if (e.exception() != null) {
                    exception(e.exception());
                    return;
                }
                if (e.status() == Snippet.Status.REJECTED) {
                    List<String> tb = new ArrayList<>();
                    String first = null;
                    for (Diag d : (Iterable<Diag>) js.diagnostics(sn)::iterator) {
                        if (!d.isError()) continue;
                        String msg = d.getMessage(Locale.ROOT);
                        if (first == null) first = msg;
                        tb.add("error: " + msg);
                        tb.addAll(excerpt(sn.source(), d));
                    }
                    if (first == null) first = "the snippet was rejected";
                    if (tb.isEmpty()) tb.add(first);
                    error("CompilationError", first, tb);
                    return;
                }
                if (e.status() == Snippet.Status.RECOVERABLE_DEFINED || e.status() == Snippet.Status.RECOVERABLE_NOT_DEFINED) {
                    List<String> unresolved = js.unresolvedDependencies((DeclarationSnippet) sn).toList();
                    Map<String, Object> m = ev("stderr");
                    m.put("text", "note: " + describe(sn) + " cannot be used until " + String.join(", ", unresolved) + " is declared\n");
                    emit(m);
                }
                if (last && e.value() != null && isExpression(sn)) {
                    Map<String, Object> m = ev("result");
                    m.put("text", e.value());
                    emit(m);
                }
            }
        }
    }

    static boolean isExpression(Snippet sn) {
        if (sn instanceof ExpressionSnippet) return true;
        return sn instanceof VarSnippet && sn.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND;
    }

    static String describe(Snippet sn) {
        if (sn instanceof DeclarationSnippet) return sn.kind().toString().toLowerCase(Locale.ROOT) + " " + ((DeclarationSnippet) sn).name();
        return "the snippet";
    }

    static List<String> excerpt(String src, Diag d) {
        long pos = d.getPosition();
        if (pos < 0 || pos > src.length()) return List.of();
        int start = src.lastIndexOf('\n', (int) Math.max(0, pos - 1)) + 1;
        int end = src.indexOf('\n', (int) pos);
        if (end < 0) end = src.length();
        String line = src.substring(start, end);
        return List.of("    " + line, "    " + " ".repeat((int) pos - start) + "^");
    }

    static void interrupted() {
        String msg = "execution interrupted (JShell.stop); the context keeps its state";
        error("Interrupted", msg, List.of(msg));
    }

    static void exception(JShellException x) {
        String ename, evalue;
        if (x instanceof EvalException) {
            // As IJava (upstream's Java kernel) reports it: the name is
            // EvalException; the exception's own class leads the value.
            ename = "EvalException";
            String m = x.getMessage();
            evalue = ((EvalException) x).getExceptionClassName() + (m == null ? "" : ": " + m);
        } else if (x instanceof UnresolvedReferenceException) {
            DeclarationSnippet sn = ((UnresolvedReferenceException) x).getSnippet();
            ename = "UnresolvedReferenceException";
            evalue = (sn == null ? "the snippet" : describe(sn)) + " cannot be invoked until its unresolved dependencies are declared";
        } else {
            ename = x.getClass().getName();
            evalue = String.valueOf(x.getMessage());
        }
        if (evalue.equals("null")) evalue = "";
        List<String> tb = new ArrayList<>();
        for (Throwable t = x; t != null; t = t.getCause()) {
            String name = t instanceof EvalException ? ((EvalException) t).getExceptionClassName() : t.getClass().getName();
            String m = t.getMessage();
            tb.add((t == x ? "" : "Caused by: ") + name + (m == null ? "" : ": " + m));
            for (StackTraceElement el : t.getStackTrace()) tb.add("\tat " + el);
        }
        error(ename, evalue, tb);
    }
}
