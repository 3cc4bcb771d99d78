import java.util.Arrays;
import org.gexec.Executor;
import org.gexec.GexecException;
import org.gexec.Model;
import org.gexec.Runtime;

/** java -cp gexec.jar:. -Djava.library.path=<dir of libgexec_jni.so> Example graph.json lib.so params.bin */
public class Example {
  public static void main(String[] args) {
    try (Runtime runtime = new Runtime(0);  // 0: one thread per core
         Model model = Model.loadFiles(runtime, args[0], args[1], args[2]);
         Executor ex = model.newExecutor()) {  // one per thread; many per model
      System.out.println("inputs: " + ex.inputInfo(0) + ", output: " + ex.outputInfo(0));

      ex.setInput(ex.inputIndex("x"), new float[] {0.5f, -1.0f, 2.0f, 0.25f});  // copied
      ex.run();
      System.out.println("y = " + Arrays.toString(ex.outputAsFloats(0)));

      // Without copies: the input reads a direct buffer in place, the output is a view.
      java.nio.ByteBuffer x = ex.allocateInput(0);  // 64-byte aligned, native order
      x.asFloatBuffer().put(new float[] {1, 2, 3, 4});
      ex.setInputZeroCopy(0, x);  // the executor keeps x alive
      ex.run();
      java.nio.FloatBuffer y = ex.outputView(0).asFloatBuffer();  // valid until the next run
      System.out.println("y = [" + y.get(0) + ", " + y.get(1) + ", " + y.get(2) + "]");
    } catch (GexecException e) {
      System.err.println("error " + e.code() + ": " + e.getMessage());
      System.exit(1);
    }
  }
}
