import java.util.*;
public class Adder {
    public static void main(String[] x) {
        Scanner s = new Scanner(System.in);
        System.out.println(s.nextLong() + s.nextLong());
    }
}
