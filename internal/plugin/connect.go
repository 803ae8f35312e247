package plugin

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v0 "github.com/sealfleet/sealfleet/internal/remoteseal/delegatedv0"
	"github.com/sealfleet/sealfleet/internal/remoteseal/provider"
)

func (a *app) connectStringCommand() *cobra.Command {
	var providerURL string
	cmd := &cobra.Command{
		Use:   "connect-string PARTNER --url https://PROVIDER",
		Short: "The connect string a remote-seal partner pastes into its Curio (from its partner Secret)",
		Long: `Prints the connect string of partner PARTNER (the Secret PARTNER, labelled
` + provider.LabelPartner + `, in -n, the operator's release namespace): base64 of the
provider's URL and the partner's token, as Curio's "add remote seal provider" reads it. The
URL is where the partner reaches sealfleet's remote-seal Service (https://…). The output is a
secret: hand it to the partner only.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := url.Parse(providerURL)
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return fmt.Errorf("--url %q must be the provider's external base URL, e.g. https://seal.example.com", providerURL)
			}
			c, ns, err := a.namespacedClient()
			if err != nil {
				return err
			}
			var s corev1.Secret
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, &s); err != nil {
				return fmt.Errorf("partner Secret %s/%s: %w", ns, args[0], err)
			}
			if s.Labels[provider.LabelPartner] == "" {
				return fmt.Errorf("the Secret %s/%s is not a remote-seal partner: label it %s=true", ns, args[0], provider.LabelPartner)
			}
			p, err := provider.ParsePartner(&s)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.env.Out, v0.ConnectString(providerURL, p.Token()))
			return nil
		},
	}
	cmd.Flags().StringVar(&providerURL, "url", "", "the provider's external base URL (required)")
	return cmd
}
