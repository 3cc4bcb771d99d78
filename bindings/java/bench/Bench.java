import org.gexec.Executor;
import org.gexec.Model;

/** The Java binding's cost per run(): examples/mlp run through Executor.run() (one JNI
 *  call into executor_run), and a whole step with arrays (setInput float[], run,
 *  copyOutput float[]); best ns per call over batches, as benchmarks/c_api does for C.
 *  Arguments: graph.json, kernel library, params.bin [, repeats]. */
public final class Bench {
  interface Body {
    void run();
  }

  static double bestNs(Body f, int repeats, int number) {
    double best = Double.MAX_VALUE;
    for (int r = 0; r < repeats; ++r) {
      long start = System.nanoTime();
      for (int i = 0; i < number; ++i) f.run();
      best = Math.min(best, (double) (System.nanoTime() - start) / number);
    }
    return best;
  }

  public static void main(String[] args) {
    int repeats = args.length > 3 ? Integer.parseInt(args[3]) : 200;
    int number = 2000;
    float[] x = {0.5f, -1.0f, 2.0f, 0.25f};
    float[] y = new float[3];
    try (Model m = Model.loadFiles(null, args[0], args[1], args[2]); Executor ex = m.newExecutor()) {
      ex.setInput(0, x);
      Body run = ex::run;
      Body step = () -> {
        ex.setInput(0, x);
        ex.run();
        ex.copyOutput(0, y);
      };
      for (int i = 0; i < 20000; ++i) step.run(); // warm up the JIT
      double runNs = Double.MAX_VALUE, stepNs = Double.MAX_VALUE;
      for (int round = 0; round < 5; ++round) {
        runNs = Math.min(runNs, bestNs(run, repeats / 5 + 1, number));
        stepNs = Math.min(stepNs, bestNs(step, repeats / 5 + 1, number));
      }
      System.out.printf("Java, examples/mlp, best ns per call over %d x %d calls each%n", repeats, number);
      System.out.printf("  Executor.run():                            %8.1f ns%n", runNs);
      System.out.printf("  setInput(float[]) + run() + copyOutput(): %8.1f ns%n", stepNs);
    }
  }
}
